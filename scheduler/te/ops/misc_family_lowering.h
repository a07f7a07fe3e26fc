/// \file The misc family's lowerings: ops of no other family. Its entry point register_misc_lowerings
/// (misc_family_lowering.cc) calls one registration function per lowering file below; the helpers are
/// shared by them.
#pragma once
#include <cstdint>
#include <vector>

#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te::misc {

/// The dtype float arithmetic is written in: float64 stays, float16/bfloat16/float32 compute in float32.
inline DType compute_dtype(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

/// A float immediate in dtype t.
inline Expr fimm(double v, DType t) { return float_imm(v, t); }

/// An Int64 index expression converted to float dtype t.
inline Expr to_float(const Expr& i, DType t) { return cast(t, i); }

/// Clamps an Int64 index into [0, extent) so a data-dependent load can never leave its tensor.
inline Expr clamp_index(const Expr& i, int64_t extent) { return max(min(i, int_imm(extent - 1)), int_imm(0)); }

/// lo <= i < hi for an Int64 index.
inline Expr in_range(const Expr& i, int64_t lo, int64_t hi) { return i >= int_imm(lo) && i < int_imm(hi); }

/// The scalar value of a one-element tensor (any rank), as a load with all-zero indices.
inline Expr scalar_of(const TensorRef& t) { return at(t, std::vector<Expr>(t->shape.size(), int_imm(0))); }

/// A compile-time scalar int input (shape inference already required it to be constant).
inline int64_t constant_int(const LowerContext& c, size_t i, const char* what) {
  return c.require_constant(i, what).get_int(0);
}

/// When the stage computed in `t` (a reduction accumulating in float32) must become output dtype `out`
/// (float16/bfloat16), a cast stage; otherwise `t` itself.
inline TensorRef cast_stage(const LowerContext& c, const TensorRef& t, DType out) {
  if (t->dtype == out) return t;
  return compute(c.name("cast"), "elementwise", out, t->shape, [&](const std::vector<Expr>& idx) {
    return cast(out, at(t, idx));
  });
}

void register_bitcast_lowering(LoweringRegistry& r);              // bitcast_lowering.cc
void register_swiglu_lowering(LoweringRegistry& r);               // swiglu_lowering.cc
void register_if_merge_lowering(LoweringRegistry& r);             // kiln.IfMerge: if_merge_lowering.cc
void register_step_loop_lowering(LoweringRegistry& r);           // kiln.StepLoop: step_loop_lowering.cc
void register_tensor_scatter_lowering(LoweringRegistry& r);       // tensor_scatter_lowering.cc
void register_ml_domain_lowerings(LoweringRegistry& r);           // Binarizer, ArrayFeatureExtractor
void register_training_optimizer_lowerings(LoweringRegistry& r);  // Adagrad, Momentum, Adam
void register_sampling_lowerings(LoweringRegistry& r);  // GridSample, AffineGrid, RoiAlign, DeformConv, Col2Im
void register_signal_lowerings(LoweringRegistry& r);    // windows, MelWeightMatrix, DFT, STFT

}  // namespace kiln::te::misc
