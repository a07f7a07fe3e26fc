/// \file Internals shared by the misc family files: misc_ops.cc (entry point, small ops, ml and training
/// domains), misc_sampling.cc (GridSample, AffineGrid, RoiAlign, DeformConv, Col2Im) and misc_dynamic.cc
/// (NonMaxSuppression, NonZero, Unique: ops whose output shape depends on input values).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/ops/op_util.h"

namespace kiln::misc {

/// Throws Error("node 'n' (Op): msg"), for helpers that both infer and eval call.
[[noreturn]] inline void fail(const Node& node, const std::string& msg) { throw Error(node.label() + ": " + msg); }

/// Reports a non-float input as unsupported (these ops compute in floating point only).
inline void require_float_input(const InferContext& c, size_t i, const char* what) {
  if (!is_float(c.dtype(i)))
    c.unsupported(std::string("input '") + what + "' has dtype " + dtype_name(c.dtype(i)) + ", expected a float type");
}

inline void require_integer_input(const InferContext& c, size_t i, const char* what) {
  if (!is_integer(c.dtype(i)))
    c.fail(std::string("input '") + what + "' must have an integer dtype, got " + dtype_name(c.dtype(i)));
}

/// The values of an integer input that shapes the output (so it must be known at compile time).
inline std::vector<int64_t> constant_ints(const InferContext& c, size_t i, const char* what) {
  require_integer_input(c, i, what);
  return tensor_ints(c.require_constant(i, what));
}

void register_sampling_ops(OpRegistry& r);
void register_dynamic_shape_ops(OpRegistry& r);

}  // namespace kiln::misc
