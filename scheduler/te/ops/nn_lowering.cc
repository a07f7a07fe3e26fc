// The nn family as tensor expressions: convolutions (nn_conv_lowering.cc), pooling
// (nn_pool_lowering.cc) and Resize/Upsample (nn_resize_lowering.cc). This file holds the family's
// entry point and the window index arithmetic they share.
#include <algorithm>

#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te {
namespace nn_lower {
namespace {

// Floor division of an index expression by a positive constant, without a no-op divide by one.
Expr floordiv_by(const Expr& a, int64_t d) { return d == 1 ? a : floordiv(a, int_imm(d)); }

int64_t floor_div(int64_t a, int64_t b) { return nn::floor_div(a, b); }

}  // namespace

DType compute_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

Expr and_cond(const Expr& a, const Expr& b) {
  if (!a) return b;
  if (!b) return a;
  return a && b;
}

Expr guarded(const Expr& cond, const Expr& value, const Expr& fallback) {
  return cond ? select(cond, value, fallback) : value;
}

Expr window_pos(const nn::Window& w, size_t a, const Expr& o, const Expr& k) {
  return o * w.strides[a] + k * w.dilations[a] - w.pads_begin[a];
}

Expr window_inside(const nn::Window& w, size_t a, int64_t extent, const Expr& pos) {
  // Positions grow with both the output position and the tap, so the extremes are the first tap of
  // the first window and the last tap of the last window.
  int64_t lowest = -w.pads_begin[a];
  int64_t highest = (w.out[a] - 1) * w.strides[a] + (w.kernel[a] - 1) * w.dilations[a] - w.pads_begin[a];
  Expr cond;
  if (lowest < 0) cond = pos >= int_imm(0);
  if (highest >= extent) cond = and_cond(cond, pos < int_imm(extent));
  return cond;
}

int64_t window_tap_count_at(const nn::Window& w, size_t a, int64_t o, int64_t lo, int64_t hi) {
  // Tap k reads base + k * d; it counts when lo <= base + k * d < hi.
  int64_t base = o * w.strides[a] - w.pads_begin[a], d = w.dilations[a];
  int64_t k_lo = std::max<int64_t>(0, -floor_div(base - lo, d));
  int64_t k_hi = std::min<int64_t>(w.kernel[a] - 1, floor_div(hi - 1 - base, d));
  return std::max<int64_t>(0, k_hi - k_lo + 1);
}

Expr window_tap_count(const nn::Window& w, size_t a, const Expr& o, int64_t lo, int64_t hi) {
  // Most windows (no padding, or padding only counted) have one count for every position: fold it.
  int64_t first = window_tap_count_at(w, a, 0, lo, hi);
  bool uniform = true;
  for (int64_t i = 1; i < w.out[a] && uniform; ++i) uniform = window_tap_count_at(w, a, i, lo, hi) == first;
  if (uniform) return int_imm(first);
  // The same formula as window_tap_count_at, on index expressions (ceil(x / d) = floor((x + d - 1) / d)).
  int64_t d = w.dilations[a];
  Expr base_rel = o * w.strides[a];  // base = base_rel - pad_begin
  Expr k_lo = max(int_imm(0), floordiv_by(int_imm(lo + w.pads_begin[a] + d - 1) - base_rel, d));
  Expr k_hi = min(int_imm(w.kernel[a] - 1), floordiv_by(int_imm(hi - 1 + w.pads_begin[a]) - base_rel, d));
  return max(int_imm(0), k_hi - k_lo + 1);
}

Expr quant_param(const TensorRef& t, const Expr& channel) {
  if (num_elements(t->shape) == 1) return at(t, std::vector<Expr>(t->shape.size(), int_imm(0)));
  return at(t, {channel});
}

std::vector<Expr> unravel(const Expr& flat, const Shape& shape) {
  std::vector<Expr> idx(shape.size());
  int64_t stride = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    Expr q = floordiv_by(flat, stride);
    idx[a] = a == 0 ? q : floormod(q, int_imm(shape[a]));
    stride *= shape[a];
  }
  return idx;
}

}  // namespace nn_lower

void register_nn_lowerings(LoweringRegistry& r) {
  nn_lower::register_conv_lowerings(r);
  nn_lower::register_pool_lowerings(r);
  nn_lower::register_resize_lowerings(r);
  nn_lower::register_blocked_layout_lowerings(r);
  nn_lower::register_recurrent_lowerings(r);
}

}  // namespace kiln::te
