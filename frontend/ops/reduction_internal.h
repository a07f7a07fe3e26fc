/// \file Helpers shared by the reduction family's files (reduction_*.cc, normalization_*.cc). The
/// family registers through the single entry point register_reduction_ops; the functions below let
/// each file register its own ops.
#pragma once
#include <cstdint>
#include <string>

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::reduction_family {

void register_reduce_ops(OpRegistry& r);         // Reduce*, ArgMax, ArgMin (reduction_ops.cc)
void register_softmax_ops(OpRegistry& r);        // Softmax, LogSoftmax, Hardmax (reduction_softmax.cc)
void register_loss_ops(OpRegistry& r);           // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_normalization_ops(OpRegistry& r);  // BatchNorm, LayerNorm, GroupNorm, LRN, ... (normalization_ops.cc)

/// Product of shape[begin, end): the element count of a block of axes.
inline int64_t extent_product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

/// Ops of this family that only make sense on real numbers report other dtypes as unsupported.
inline void require_float_input(const InferContext& c, size_t i, const char* what) {
  c.require_input(i, what);
  if (!is_float(c.dtype(i)))
    c.unsupported(std::string("input '") + what + "' has dtype " + dtype_name(c.dtype(i)) + ", only float dtypes are supported");
}

/// Fails unless input i (when present) has the dtype `want`.
inline void require_dtype(const InferContext& c, size_t i, DType want, const char* what) {
  if (c.has_input(i) && c.dtype(i) != want)
    c.fail(std::string("input '") + what + "' has dtype " + dtype_name(c.dtype(i)) + ", expected " + dtype_name(want));
}

/// Element count of output 0 times a per-element cost: the usual shape of this family's FLOP counts.
inline double output_elements_times(const NodeShapes& s, double per_element) {
  return s.out.empty() ? 0.0 : per_element * static_cast<double>(num_elements(s.out[0]));
}
inline double input_elements_times(const NodeShapes& s, double per_element) {
  return s.in.empty() ? 0.0 : per_element * static_cast<double>(num_elements(s.in[0]));
}

}  // namespace kiln::reduction_family
