/// \file The misc family: ops that belong to no other family. Its entry point register_misc_ops
/// (misc_family.cc) calls one registration function per file below; the helpers are shared by them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/ops/axes_and_broadcast.h"

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

void register_det_op(OpRegistry& r);                  // Det (det_op.cc)
void register_bitcast_op(OpRegistry& r);              // BitCast (bitcast_op.cc)
void register_swiglu_op(OpRegistry& r);               // SwiGLU (swiglu_op.cc)
void register_if_merge_op(OpRegistry& r);             // kiln.IfMerge (if_merge_op.cc)
void register_step_loop_op(OpRegistry& r);            // kiln.StepLoop (step_loop_op.cc)
void register_tensor_scatter_op(OpRegistry& r);       // TensorScatter (tensor_scatter_op.cc)
void register_ml_domain_ops(OpRegistry& r);           // ai.onnx.ml Binarizer, ArrayFeatureExtractor
void register_training_optimizer_ops(OpRegistry& r);  // ai.onnx.preview.training Adagrad, Momentum, Adam
void register_sampling_ops(OpRegistry& r);            // GridSample, AffineGrid, RoiAlign, DeformConv, Col2Im
void register_dynamic_shape_ops(OpRegistry& r);       // NonMaxSuppression, NonZero, Unique (value_dependent_ops.cc)

}  // namespace kiln::misc
