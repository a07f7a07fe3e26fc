/// \file Helpers shared by the reduction family's lowering files (reduction_*_lowering.cc): reductions
/// over a set of axes, mean/variance statistics and the per-file registration functions.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te::reduction_lowering {

void register_reduce_lowerings(LoweringRegistry& r);         // Reduce*, ArgMax, ArgMin
void register_softmax_lowerings(LoweringRegistry& r);        // Softmax, LogSoftmax, Hardmax, the two losses
void register_normalization_lowerings(LoweringRegistry& r);  // BatchNormalization, LayerNormalization, ...

/// A function of a full index of some (possibly virtual) tensor shape.
using ValueFn = std::function<Expr(const std::vector<Expr>& idx)>;

/// Half-precision arithmetic happens in float32 (as the generated code will do it); other dtypes
/// compute in themselves.
DType compute_dtype(DType t);

/// x converted to the compute dtype of its own dtype.
Expr load_as(const TensorRef& x, const std::vector<Expr>& idx, DType t);

/// Bool immediates.
Expr bool_imm(bool v);
/// True when v is neither NaN nor infinite.
Expr is_finite(const Expr& v);

/// `shape` with the axes marked in `reduced` set to 1: the shape of keep-dims statistics.
Shape kept_shape(const Shape& shape, const std::vector<bool>& reduced);
/// The index into keep-dims statistics that full index `idx` reads: reduced axes become 0.
std::vector<Expr> kept_indices(const std::vector<Expr>& idx, const std::vector<bool>& reduced);
/// Number of elements one output of a reduction over `reduced` combines.
int64_t reduced_count(const Shape& shape, const std::vector<bool>& reduced);

/// `reducer` of value(full index) over the axes of `shape` marked in `reduced`. The result has the
/// shape of the non-reduced axes, with 1 in place of the reduced ones when `keepdims`.
TensorRef reduce_over(const std::string& name, DType dtype, const Shape& shape, const std::vector<bool>& reduced,
                      bool keepdims, Reducer reducer, const ValueFn& value, Expr init = nullptr);

/// Mean and population variance (keep-dims, in `dtype`) of value(full index) over the `reduced` axes
/// of `shape`. Two passes, as the reference kernel does, so the variance does not cancel badly.
struct Moments {
  TensorRef mean, var;
};
Moments moments(const LowerContext& c, DType dtype, const Shape& shape, const std::vector<bool>& reduced,
                const ValueFn& value);

/// 1 / sqrt(var + epsilon), elementwise over the statistics `var`.
TensorRef inverse_std(const LowerContext& c, const TensorRef& var, double epsilon);

/// `t` converted to `dtype` by an elementwise stage named `name`; `t` itself when it already has it.
TensorRef cast_stage(const std::string& name, const TensorRef& t, DType dtype);

}  // namespace kiln::te::reduction_lowering
