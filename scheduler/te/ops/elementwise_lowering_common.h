/// \file Helpers shared by the elementwise family's lowering files (elementwise_*.cc); not for other families.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te::elementwise {

/// The dtype float math on values of dtype `t` is written in: half-precision floats compute in float32
/// (there is no half arithmetic to generate), integers and bool in float64 (the reference kernels run
/// their float formulas on doubles, and float64 holds every int32 exactly), other floats in themselves.
DType float_compute_dtype(DType t);

/// `x` cast to float_compute_dtype(x's dtype).
Expr widen(const Expr& x);

/// An immediate of value `v` in the dtype of `like`, for writing formulas without repeating dtypes.
Expr imm(const Expr& like, double v);

/// Values of some of a node's inputs at one output point, in the order they were asked for.
using ValuesFn = std::function<Expr(const std::vector<Expr>& values)>;

/// Output 0 as one stage over the output shape: f(values of inputs `which`), each input loaded with numpy
/// broadcasting onto the output shape. Inputs not listed (CastLike's type donor, Clip's scalar bounds)
/// are not loaded here: their shapes need not broadcast to the output.
void set_mapped_output(LowerContext& c, const std::string& tag, const std::vector<size_t>& which, const ValuesFn& f);

/// Output 0 = f(values of all inputs) with numpy broadcasting; "elementwise" when every input already
/// has the output's shape, "broadcast" otherwise.
void set_broadcast_output(LowerContext& c, const ValuesFn& f);

/// Lowerings defined in the family's other files; elementwise_lowering.cc registers them all.
void register_binary_lowerings(LoweringRegistry& r);   // arithmetic, Pow, Mod, comparisons, logic, bitwise, variadic
void register_special_lowerings(LoweringRegistry& r);  // Cast, CastLike, Clip, Where, PRelu

}  // namespace kiln::te::elementwise
