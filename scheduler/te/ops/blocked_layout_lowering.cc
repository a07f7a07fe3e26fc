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

void lower_reorder_from_blocked(LowerContext& c) { c.set_output(0, from_blocks(c.name(), c.input(0), c.out_shape(0))); }

// The input of a blocked conv with kernel extents `kernel` and its window: zero-padded (as Conv's
// lowering does, for the same reason: no bounds check per tap) when some window leaves it.
std::pair<TensorRef, nn::Window> blocked_conv_input(const LowerContext& c, std::vector<int64_t> kernel) {
  const TensorRef& x = c.input(0);
  const Shape spatial(x->shape.begin() + 2, x->shape.end() - 1);
  nn::Window win = nn::forward_window(c.node(), spatial, std::move(kernel), false);
  if (!window_leaves(win, spatial)) return {x, win};
  return zero_padded(c, x, win);
}

// The per-channel bias added to a blocked conv's accumulator (a stage of its own, as for Conv), or
// the accumulator itself without one.
TensorRef with_blocked_bias(LowerContext& c, const TensorRef& acc) {
  if (!c.has_input(2)) return acc;
  const TensorRef& bias = c.input(2);
  return compute(c.name(), "broadcast", acc->dtype, acc->shape,
                 [&](const std::vector<Expr>& idx) { return at(acc, idx) + at(bias, {idx[1], idx.back()}); });
}

// out[n, cb, oh, ow, c] = sum over taps of x[n, cb, window, c] * w[cb, kh, kw, c]: the channels are
// the vector, and each tap's weights one vector load.
void lower_depthwise_conv_blocked(LowerContext& c) {
  const TensorRef& w = c.input(1);
  const auto [x, win] = blocked_conv_input(c, {w->shape[1], w->shape[2]});
  TensorRef acc = reduce(c.has_input(2) ? c.name("acc") : c.name(), "conv", c.out_dtype(0), c.out_shape(0), Reducer::Sum,
                         {w->shape[1], w->shape[2]}, [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           Expr h = window_pos(win, 0, idx[2], r[0]), wpos = window_pos(win, 1, idx[3], r[1]);
                           return at(x, {idx[0], idx[1], h, wpos, idx[4]}) * at(w, {idx[1], r[0], r[1], idx[4]});
                         });
  c.set_output(0, with_blocked_bias(c, acc));
}

// Reduces over (input channel block of the group, the kernel's taps axis by axis, input channel in the
// block), for 1 to 3 spatial axes. A grouped conv's output block reads its group's input blocks,
// from (block / output blocks per group) x input blocks per group on.
void lower_conv_blocked(LowerContext& c) {
  const TensorRef& w = c.input(1);
  const size_t k = w->shape.size() - 4;  // spatial axes
  const int64_t group = c.node().attr_int("group", 1), out_per_group = w->shape[0] / group, in_per_group = w->shape[1];
  const auto [x, win] = blocked_conv_input(c, std::vector<int64_t>(w->shape.begin() + 2, w->shape.end() - 2));
  TensorRef acc = reduce(c.has_input(2) ? c.name("acc") : c.name(), "conv", c.out_dtype(0), c.out_shape(0), Reducer::Sum,
                         std::vector<int64_t>(w->shape.begin() + 1, w->shape.end() - 1),
                         [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           Expr in_block = r[0];
                           if (group > 1) {
                             Expr g = out_per_group == 1 ? idx[1] : floordiv(idx[1], int_imm(out_per_group));
                             in_block = g * in_per_group + r[0];
                           }
                           std::vector<Expr> xi{idx[0], in_block}, wi{idx[1], r[0]};
                           for (size_t a = 0; a < k; ++a) {
                             xi.push_back(window_pos(win, a, idx[2 + a], r[1 + a]));
                             wi.push_back(r[1 + a]);
                           }
                           xi.push_back(r[k + 1]);
                           wi.insert(wi.end(), {r[k + 1], idx.back()});
                           return at(x, xi) * at(w, wi);
                         });
  c.set_output(0, with_blocked_bias(c, acc));
}

}  // namespace

TensorRef from_blocks(const std::string& name, const TensorRef& x, const Shape& out) {
  const int64_t b = x->shape.back();
  return compute(name, "injective", x->dtype, out, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> xi{idx[0], floordiv(idx[1], int_imm(b))};
    xi.insert(xi.end(), idx.begin() + 2, idx.end());
    xi.push_back(floormod(idx[1], int_imm(b)));
    return at(x, xi);
  });
}

// A depthwise int8 conv on blocks of codes (kiln.QLinearConvBlocked with group = C): per tap a vector
// of b channels' codes, widened to int32, times their weights. There are no four products of one
// output to pack into a dot product without the NCHW form's repacking of taps (int8_dot_layout.h),
// which took more time than the conv itself (ultraface int8: bench/RESULTS.md). The input is padded
// with its zero point, so a padding tap adds zx * w, which the zero point's constant takes off with
// the rest: sum (x - zx) w = sum x w - zx sum w.
void lower_qlinear_depthwise_blocked(LowerContext& c) {
  const DType i32 = DType::Int32;
  const Tensor* w = c.constant(3);
  const Tensor* zx = c.constant(2);
  const Tensor* bias = c.has_input(8) ? c.constant(8) : nullptr;
  const std::shared_ptr<const Tensor> sums = symmetric_weight_sums(c, 3, 5);
  if (!w || !zx || zx->size() != 1 || !sums || (c.has_input(8) && !bias) || w->shape().size() != 4)
    c.fail("a blocked depthwise QLinearConv needs symmetric constant weights, a constant scalar x_zero_point and a constant bias");
  const TensorRef& x = c.input(0);
  const int64_t b = x->shape.back(), blocks = x->shape[1], channels = w->shape()[0], kh = w->shape()[2], kw = w->shape()[3];
  Tensor packed(i32, {blocks, kh, kw, b});  // padded channels weigh 0
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t t = 0; t < kh * kw; ++t) packed.set_int((ch / b * kh * kw + t) * b + ch % b, w->get_int(ch * kh * kw + t));
  const auto packed_values = std::make_shared<const Tensor>(std::move(packed));
  TensorRef wb = placeholder(c.name("weight_blocks"), i32, packed_values->shape(), packed_values);
  const Shape spatial(x->shape.begin() + 2, x->shape.end() - 1);
  nn::Window win = nn::forward_window(c.node(), spatial, {kh, kw}, false);
  TensorRef xp = x;
  if (window_leaves(win, spatial)) std::tie(xp, win) = padded_with(c, x, win, const_of(x->dtype, static_cast<double>(zx->get_int(0))));
  TensorRef sum = reduce(c.name("acc.sum"), "conv", i32, c.out_shape(0), Reducer::Sum, {kh, kw},
                         [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           Expr h = window_pos(win, 0, idx[2], r[0]), wpos = window_pos(win, 1, idx[3], r[1]);
                           return cast(i32, at(xp, {idx[0], idx[1], h, wpos, idx[4]})) * at(wb, {idx[1], r[0], r[1], idx[4]});
                         });
  const ChannelLayout layout = ChannelLayout::blocked(channels, b);
  TensorRef acc = minus_channel_constants(c, c.name("acc"), sum, zx->get_int(0), *sums, bias, layout);
  c.set_output(0, requantized_conv_output(c, acc, c.name(), layout));
}

void register_blocked_layout_lowerings(LoweringRegistry& r) {
  r.add({"ReorderToBlocked", "kiln", lower_reorder_to_blocked});
  r.add({"ReorderFromBlocked", "kiln", lower_reorder_from_blocked});
  r.add({"ConvBlocked", "kiln", lower_conv_blocked});
  r.add({"DepthwiseConvBlocked", "kiln", lower_depthwise_conv_blocked});
}

}  // namespace kiln::te::nn_lower
