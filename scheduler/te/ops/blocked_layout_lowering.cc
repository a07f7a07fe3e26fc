// kiln's blocked-layout ops as tensor expressions (frontend/ops/blocked_layout_ops.cc says what they
// compute). ConvBlocked is one reduction over (input channel block, kh, kw, input channel in the
// block), in the order a register-tiled kernel wants: the innermost output axis is the output channel
// within its block, so a tile's accumulators are whole vectors, each input element is broadcast, and
// each weight read is a contiguous vector of the packed weights.
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

void lower_reorder_to_blocked(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const Shape& out = c.out_shape(0);
  const int64_t b = out.back(), channels = x->shape[1];
  c.set_output(0, compute(c.name(), "injective", x->dtype, out, [&](const std::vector<Expr>& idx) {
                 Expr channel = idx[1] * b + idx.back();
                 std::vector<Expr> xi{idx[0], channel};
                 xi.insert(xi.end(), idx.begin() + 2, idx.end() - 1);
                 if (channels % b == 0) return at(x, xi);
                 return select(channel < int_imm(channels), at(x, xi), const_of(x->dtype, 0));
               }));
}

void lower_reorder_from_blocked(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const int64_t b = x->shape.back();
  c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                 std::vector<Expr> xi{idx[0], floordiv(idx[1], int_imm(b))};
                 xi.insert(xi.end(), idx.begin() + 2, idx.end());
                 xi.push_back(floormod(idx[1], int_imm(b)));
                 return at(x, xi);
               }));
}

// x with the window's padding stored as zeros (as Conv's lowering does, for the same reason: no bounds
// check per tap), or x itself when no window leaves it.
TensorRef padded_blocked(const LowerContext& c, const TensorRef& x, nn::Window& win) {
  bool leaves = false;
  for (size_t a = 0; a < 2; ++a) leaves |= window_inside(win, a, x->shape[2 + a], int_imm(0)) != nullptr;
  if (!leaves) return x;
  Shape shape = x->shape;
  for (size_t a = 0; a < 2; ++a) shape[2 + a] = (win.out[a] - 1) * win.strides[a] + win.span(a);
  TensorRef padded = compute(c.name("pad"), "pad", x->dtype, shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> xi = idx;
    Expr inside;
    for (size_t a = 0; a < 2; ++a) {
      xi[2 + a] = idx[2 + a] - win.pads_begin[a];
      inside = and_cond(inside, window_inside(win, a, x->shape[2 + a], xi[2 + a]));
    }
    return guarded(inside, at(x, xi), const_of(x->dtype, 0));
  });
  win.pads_begin.assign(2, 0);
  win.pads_end.assign(2, 0);
  return padded;
}

// The per-channel bias added to a blocked conv's accumulator (a stage of its own, as for Conv), or
// the accumulator itself without one.
TensorRef with_blocked_bias(LowerContext& c, const TensorRef& acc) {
  if (!c.has_input(2)) return acc;
  const TensorRef& bias = c.input(2);
  return compute(c.name(), "broadcast", acc->dtype, acc->shape,
                 [&](const std::vector<Expr>& idx) { return at(acc, idx) + at(bias, {idx[1], idx[4]}); });
}

// out[n, cb, oh, ow, c] = sum over taps of x[n, cb, window, c] * w[cb, kh, kw, c]: the channels are
// the vector, and each tap's weights one vector load.
void lower_depthwise_conv_blocked(LowerContext& c) {
  const TensorRef& w = c.input(1);
  nn::Window win = nn::forward_window(c.node(), {c.shape(0)[2], c.shape(0)[3]}, {w->shape[1], w->shape[2]}, false);
  const TensorRef x = padded_blocked(c, c.input(0), win);
  TensorRef acc = reduce(c.has_input(2) ? c.name("acc") : c.name(), "conv", c.out_dtype(0), c.out_shape(0), Reducer::Sum,
                         {w->shape[1], w->shape[2]}, [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           Expr h = window_pos(win, 0, idx[2], r[0]), wpos = window_pos(win, 1, idx[3], r[1]);
                           return at(x, {idx[0], idx[1], h, wpos, idx[4]}) * at(w, {idx[1], r[0], r[1], idx[4]});
                         });
  c.set_output(0, with_blocked_bias(c, acc));
}

void lower_conv_blocked(LowerContext& c) {
  const TensorRef& w = c.input(1);
  nn::Window win = nn::forward_window(c.node(), {c.shape(0)[2], c.shape(0)[3]}, {w->shape[2], w->shape[3]}, false);
  const TensorRef x = padded_blocked(c, c.input(0), win);
  const DType dt = c.out_dtype(0);
  TensorRef acc = reduce(c.has_input(2) ? c.name("acc") : c.name(), "conv", dt, c.out_shape(0), Reducer::Sum,
                         {w->shape[1], w->shape[2], w->shape[3], w->shape[4]},
                         [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           Expr h = window_pos(win, 0, idx[2], r[1]), wpos = window_pos(win, 1, idx[3], r[2]);
                           return at(x, {idx[0], r[0], h, wpos, r[3]}) * at(w, {idx[1], r[0], r[1], r[2], r[3], idx[4]});
                         });
  c.set_output(0, with_blocked_bias(c, acc));
}

}  // namespace

void register_blocked_layout_lowerings(LoweringRegistry& r) {
  r.add({"ReorderToBlocked", "kiln", lower_reorder_to_blocked});
  r.add({"ReorderFromBlocked", "kiln", lower_reorder_from_blocked});
  r.add({"ConvBlocked", "kiln", lower_conv_blocked});
  r.add({"DepthwiseConvBlocked", "kiln", lower_depthwise_conv_blocked});
}

}  // namespace kiln::te::nn_lower
