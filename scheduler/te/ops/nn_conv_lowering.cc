// Convolutions as tensor expressions: Conv, ConvTranspose, ConvInteger, QLinearConv.
//
// Every convolution is one reduction stage over (input channel in the group, kernel taps...). A float
// Conv whose window leaves its input reads a zero-padded copy of it (a stage of its own, as TVM's
// data_pad): a bounds check on every tap of the inner loop made padded convolutions ~5x slower than
// unpadded ones of the same size, and the copy costs one pass over the input. The search still
// decides where that stage is computed (compute-location rules), inlining it included. The integer
// convolutions pad with their zero point instead, so their padding taps stay behind a select whose
// other branch is zero; bounds checks are emitted only on axes whose geometry can leave the input.
#include <functional>
#include <optional>
#include <tuple>
#include <utility>

#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

Shape spatial_of(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// The channel of a grouped tensor: group g (from the other side's channel `outer` with
// `outer_per_group` channels per group) times `per_group` plus the channel within the group.
Expr grouped_channel(const Expr& outer, int64_t outer_per_group, int64_t per_group, int64_t group, const Expr& within) {
  if (group == 1) return within;
  return floordiv(outer, int_imm(outer_per_group)) * per_group + within;
}

using TermFn = std::function<Expr(const Expr& x, const Expr& w, const Expr& m)>;

}  // namespace

bool window_leaves(const nn::Window& win, const Shape& in) {
  Expr probe = int_imm(0);
  for (size_t a = 0; a < win.rank(); ++a)
    if (window_inside(win, a, in[a], probe)) return true;
  return false;
}

std::pair<TensorRef, nn::Window> zero_padded(const LowerContext& c, const TensorRef& x, nn::Window win) {
  return padded_with(c, x, std::move(win), const_of(x->dtype, 0));
}

std::pair<TensorRef, nn::Window> padded_with(const LowerContext& c, const TensorRef& x, nn::Window win, const Expr& fill) {
  Shape shape = x->shape;
  for (size_t a = 0; a < win.rank(); ++a) shape[2 + a] = (win.out[a] - 1) * win.strides[a] + win.span(a);
  TensorRef padded = compute(c.name("pad"), "pad", x->dtype, shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> xi = idx;
    Expr inside;
    for (size_t a = 0; a < win.rank(); ++a) {
      xi[2 + a] = idx[2 + a] - win.pads_begin[a];
      inside = and_cond(inside, window_inside(win, a, x->shape[2 + a], xi[2 + a]));
    }
    return guarded(inside, at(x, xi), fill);
  });
  win.pads_begin.assign(win.rank(), 0);
  win.pads_end.assign(win.rank(), 0);
  return {padded, win};
}

std::shared_ptr<const Tensor> symmetric_weight_sums(const LowerContext& c, size_t w_in, size_t w_zp) {
  const Tensor* w = c.constant(w_in);
  const Tensor* zp = c.has_input(w_zp) ? c.constant(w_zp) : nullptr;
  if (!w || (c.has_input(w_zp) && !zp)) return nullptr;
  if (zp)
    for (int64_t v : zp->to_ints())
      if (v != 0) return nullptr;
  const int64_t channels = w->shape().at(0), per = w->size() / std::max<int64_t>(channels, 1);
  std::vector<int64_t> sums(static_cast<size_t>(channels), 0);
  for (int64_t i = 0; i < w->size(); ++i) sums[static_cast<size_t>(i / per)] += w->get_int(i);
  return std::make_shared<const Tensor>(Tensor::from_ints(DType::Int32, {channels}, sums));
}

ChannelLayout ChannelLayout::nchw(int64_t channels) {
  return {channels, channels, [](const std::vector<Expr>& idx) { return idx[1]; }};
}

ChannelLayout ChannelLayout::blocked(int64_t channels, int64_t block) {
  return {(channels + block - 1) / block * block, channels,
          [block](const std::vector<Expr>& idx) { return idx[1] * block + idx.back(); }};
}

TensorRef minus_channel_constants(const LowerContext& c, const std::string& name, const TensorRef& sum, int64_t x_zero,
                                  const Tensor& sums, const Tensor* bias, const ChannelLayout& layout) {
  const DType i32 = DType::Int32;
  std::vector<int64_t> offset(static_cast<size_t>(layout.channels), 0);  // padded channels: 0
  for (int64_t m = 0; m < sums.size(); ++m)
    offset[static_cast<size_t>(m)] = wrap_to_dtype(x_zero * sums.get_int(m) - (bias ? bias->get_int(m) : 0), i32);
  const Shape shape{layout.channels};
  TensorRef off = placeholder(c.name("zero_point_offset"), i32, shape,
                              std::make_shared<const Tensor>(Tensor::from_ints(i32, shape, offset)));
  return compute(name, "elementwise", i32, sum->shape,
                 [&](const std::vector<Expr>& idx) { return at(sum, idx) - at(off, {layout.channel(idx)}); });
}

TensorRef requantized_conv_output(const LowerContext& c, const TensorRef& acc, const std::string& name, const ChannelLayout& layout) {
  const int64_t real = layout.real;
  Shape channels{layout.channels};
  // The reference forms the multiplier x_scale * w_scale / y_scale in float32, rounding after each
  // operation: one float32 stage per operation reproduces that exactly. A padded channel takes the
  // last real one's (its output is never read).
  TensorRef xw = compute(c.name("xw_scale"), "broadcast", DType::Float32, channels, [&](const std::vector<Expr>& i) {
    const Expr channel = layout.channels == real ? i[0] : min(i[0], int_imm(real - 1));
    return quant_param(c.input(1), int_imm(0)) * quant_param(c.input(4), channel);
  });
  TensorRef multiplier = compute(c.name("multiplier"), "broadcast", DType::Float32, channels,
                                 [&](const std::vector<Expr>& i) { return at(xw, i) / quant_param(c.input(6), int_imm(0)); });
  DType t = c.out_dtype(0);
  double lowest = t == DType::Int8 ? -128 : 0, highest = t == DType::Int8 ? 127 : 255;
  return compute(name, "elementwise", t, acc->shape, [&](const std::vector<Expr>& idx) {
    // Requantize in float32 as ONNX Runtime does (frontend/ops/linalg_internal.h): round half to even,
    // add the zero point, saturate. Every step is exact in float32 but the product. The multiplier
    // is read first so the DAG orders its stages before the accumulator's reduction: the default
    // schedule then finishes the reduction with this stage inside its loop nest (lower_dag's
    // epilogues read only what is stored before the reduction runs), and the int32 accumulator is
    // never stored (ds_cnn_int8 on the M4: arena 72,000 -> 40,256 bytes).
    const DType f32 = DType::Float32;
    Expr scaled = at(multiplier, {layout.channel(idx)}) * cast(f32, at(acc, idx));
    Expr v = unary(ExprOp::Round, scaled) + cast(f32, quant_param(c.input(7), int_imm(0)));
    v = min(max(v, float_imm(lowest, f32)), float_imm(highest, f32));
    return cast(t, v);
  });
}

namespace {

// out[n, m, o...] = sum over the input channels c of m's group and the kernel taps k of
// term(x[n, c, o * stride + k * dilation - pad], w[m, c, k], m); padding taps add nothing.
// X is N x C x D..., W is M x C/group x K....
// With `pad_fill`, a window that leaves X reads a copy padded with that value (padded_with) instead.
TensorRef forward_conv(const LowerContext& c, const std::string& name, TensorRef x, const TensorRef& w, DType acc,
                       const TermFn& term, const Expr& pad_fill = nullptr) {
  int64_t group = c.node().attr_int("group", 1);
  nn::Window win = nn::forward_window(c.node(), spatial_of(x->shape), spatial_of(w->shape), false);
  if (pad_fill && window_leaves(win, spatial_of(x->shape))) std::tie(x, win) = padded_with(c, x, win, pad_fill);
  int64_t per_group_in = w->shape[1], per_group_out = w->shape[0] / group;
  std::vector<int64_t> extents{per_group_in};
  extents.insert(extents.end(), w->shape.begin() + 2, w->shape.end());
  return reduce(name, "conv", acc, c.out_shape(0), Reducer::Sum, extents,
                [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                  const Expr& m = idx[1];
                  std::vector<Expr> xi{idx[0], grouped_channel(m, per_group_out, per_group_in, group, r[0])};
                  std::vector<Expr> wi{m, r[0]};
                  Expr inside;
                  for (size_t a = 0; a < win.rank(); ++a) {
                    Expr pos = window_pos(win, a, idx[2 + a], r[1 + a]);
                    inside = and_cond(inside, window_inside(win, a, x->shape[2 + a], pos));
                    xi.push_back(pos);
                    wi.push_back(r[1 + a]);
                  }
                  return guarded(inside, term(at(x, xi), at(w, wi), m), const_of(acc, 0));
                });
}

// Whether the accumulator is already the output: no bias to add and no dtype to convert to.
bool acc_is_output(const LowerContext& c, DType acc, size_t bias) { return !c.has_input(bias) && acc == c.out_dtype(0); }

// The output from the accumulator: plus the per-channel bias (input `bias`, when present), converted
// to the output dtype. A separate stage, as a reduction's init cannot read per-element values.
TensorRef finish_conv(const LowerContext& c, const TensorRef& acc, size_t bias) {
  if (acc_is_output(c, acc->dtype, bias)) return acc;
  return compute(c.name(), "broadcast", c.out_dtype(0), acc->shape, [&](const std::vector<Expr>& idx) {
    Expr v = at(acc, idx);
    if (c.has_input(bias)) v = v + cast(acc->dtype, at(c.input(bias), {idx[1]}));
    return cast(c.out_dtype(0), v);
  });
}

void lower_conv(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType acc = compute_dtype(c.out_dtype(0));
  TermFn term = [acc](const Expr& xv, const Expr& wv, const Expr&) { return cast(acc, xv) * cast(acc, wv); };
  TensorRef y = forward_conv(c, acc_is_output(c, acc, 2) ? c.name() : c.name("acc"), x, c.input(1), acc, term, const_of(x->dtype, 0));
  c.set_output(0, finish_conv(c, y, 2));
}

// ---- ConvTranspose ----------------------------------------------------------------------------

// The leading padding of ConvTranspose along every spatial axis: output position o receives input
// position i through tap k when o = i * stride + k * dilation - pad_begin. Mirrors the frontend's
// geometry (output_shape / auto_pad crop the full extent, else the pads attribute).
std::vector<int64_t> conv_transpose_pads_begin(const Node& node, const Shape& in_spatial, const Shape& kernel) {
  size_t r = in_spatial.size();
  std::vector<int64_t> strides = nn::spatial_attr(node, "strides", r, 1, 1);
  std::vector<int64_t> dilations = nn::spatial_attr(node, "dilations", r, 1, 1);
  std::vector<int64_t> output_padding = nn::spatial_attr(node, "output_padding", r, 0, 0);
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> target;
  if (node.has_attr("output_shape")) {
    target = node.attr_ints("output_shape");
    if (target.size() == r + 2) target.erase(target.begin(), target.begin() + 2);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < r; ++a) target.push_back(in_spatial[a] * strides[a]);
  }
  std::vector<int64_t> pads(r, 0);
  if (!target.empty()) {
    for (size_t a = 0; a < r; ++a) {
      int64_t full = strides[a] * (in_spatial[a] - 1) + output_padding[a] + (kernel[a] - 1) * dilations[a] + 1;
      int64_t total = full - target[a], half = nn::floor_div(total, 2);
      pads[a] = auto_pad == "SAME_UPPER" ? half : total - half;
    }
  } else if (auto_pad == "NOTSET" && node.has_attr("pads")) {
    std::vector<int64_t> all = node.attr_ints("pads");
    pads.assign(all.begin(), all.begin() + static_cast<int64_t>(r));
  }
  return pads;
}

// y[n, m, o] = bias[m] + sum over input channels c of m's group and taps k of x[n, c, i] * w[c, m', k]
// where o = i * stride + k * dilation - pad_begin: the gather form of the scatter the op describes,
// so each output element is one reduction. Taps with no integral in-range i contribute zero.
void lower_conv_transpose(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const TensorRef& w = c.input(1);
  const Shape& out = c.out_shape(0);
  DType acc = compute_dtype(c.out_dtype(0));
  Shape in_spatial = spatial_of(x->shape), kernel = spatial_of(w->shape);
  size_t rank = in_spatial.size();
  std::vector<int64_t> strides = nn::spatial_attr(c.node(), "strides", rank, 1, 1);
  std::vector<int64_t> dilations = nn::spatial_attr(c.node(), "dilations", rank, 1, 1);
  std::vector<int64_t> pads = conv_transpose_pads_begin(c.node(), in_spatial, kernel);
  int64_t group = c.node().attr_int("group", 1);
  int64_t per_group_in = x->shape[1] / group, per_group_out = w->shape[1];
  std::vector<int64_t> extents{per_group_in};
  extents.insert(extents.end(), kernel.begin(), kernel.end());

  auto body = [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
    const Expr& m = idx[1];
    Expr in_channel = grouped_channel(m, per_group_out, per_group_in, group, r[0]);
    Expr m_within = group == 1 ? m : floormod(m, int_imm(per_group_out));
    std::vector<Expr> xi{idx[0], in_channel}, wi{in_channel, m_within};
    Expr valid;
    for (size_t a = 0; a < rank; ++a) {
      // t = i * stride: must be a non-negative multiple of the stride with i inside the input.
      Expr t = idx[2 + a] + pads[a] - r[1 + a] * dilations[a];
      Expr i = strides[a] == 1 ? t : floordiv(t, int_imm(strides[a]));
      int64_t t_min = pads[a] - (kernel[a] - 1) * dilations[a], t_max = out[2 + a] - 1 + pads[a];
      if (t_min < 0) valid = and_cond(valid, t >= int_imm(0));
      if (strides[a] != 1) valid = and_cond(valid, eq(floormod(t, int_imm(strides[a])), int_imm(0)));
      if (nn::floor_div(t_max, strides[a]) >= in_spatial[a]) valid = and_cond(valid, i < int_imm(in_spatial[a]));
      xi.push_back(i);
      wi.push_back(r[1 + a]);
    }
    return guarded(valid, cast(acc, at(x, xi)) * cast(acc, at(w, wi)), const_of(acc, 0));
  };
  TensorRef y =
      reduce(acc_is_output(c, acc, 2) ? c.name() : c.name("acc"), "conv", acc, out, Reducer::Sum, extents, body);
  c.set_output(0, finish_conv(c, y, 2));
}

// ---- Quantized convolutions -------------------------------------------------------------------

// (q - zero_point) in int32, the zero point being input `zp` of the node (absent: 0), per tensor or,
// for weights, per output channel `m`.
Expr dequantized(const LowerContext& c, const Expr& q, size_t zp, const Expr& m) {
  Expr v = cast(DType::Int32, q);
  if (!c.has_input(zp)) return v;
  return v - cast(DType::Int32, quant_param(c.input(zp), m));
}

// The int32 accumulator of an integer convolution of inputs x_in / w_in with their zero points, plus
// the int32 bias of input `bias` when given (`bias_added` says whether it was). When the weights are
// constant and symmetric (the usual int8 quantization) and x's zero point is known, sum (x - zx) * w
// is computed as sum x * w - zx * sum w: the zero point leaves the inner loop, where it cost a
// subtraction a multiply-add, and zx * sum w less the bias is one constant per output channel, as
// large as the bias it replaces. The padding taps then read x's zero point (a padded copy, as float
// convolutions pad with zeros), which the constant cancels exactly; int32 arithmetic wraps, so the
// result is the same integer.
TensorRef integer_conv(LowerContext& c, const std::string& name, size_t x_in, size_t x_zp, size_t w_in, size_t w_zp,
                       std::optional<size_t> bias, bool* bias_added) {
  *bias_added = false;
  const std::shared_ptr<const Tensor> sums = symmetric_weight_sums(c, w_in, w_zp);
  const Tensor* zx = c.has_input(x_zp) ? c.constant(x_zp) : nullptr;
  const Tensor* b = bias && c.has_input(*bias) ? c.constant(*bias) : nullptr;
  if (!sums || !zx || zx->size() != 1 || (bias && c.has_input(*bias) && !b)) {
    TermFn term = [&](const Expr& xv, const Expr& wv, const Expr& m) {
      return dequantized(c, xv, x_zp, int_imm(0)) * dequantized(c, wv, w_zp, m);
    };
    return forward_conv(c, name, c.input(x_in), c.input(w_in), DType::Int32, term);
  }
  const DType i32 = DType::Int32;
  *bias_added = b != nullptr;
  TermFn term = [&](const Expr& xv, const Expr& wv, const Expr&) { return cast(i32, xv) * cast(i32, wv); };
  TensorRef sum = forward_conv(c, name + ".sum", c.input(x_in), c.input(w_in), i32, term, const_of(c.dtype(x_in), static_cast<double>(zx->get_int(0))));
  return minus_channel_constants(c, name, sum, zx->get_int(0), *sums, b, ChannelLayout::nchw(sums->size()));
}

void lower_conv_integer(LowerContext& c) {
  bool unused;
  c.set_output(0, integer_conv(c, c.name(), 0, 2, 1, 3, std::nullopt, &unused));
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void lower_qlinear_conv(LowerContext& c) {
  bool bias_added = false;
  TensorRef acc = integer_conv(c, c.name("acc"), 0, 2, 3, 5, 8, &bias_added);
  if (c.has_input(8) && !bias_added)
    acc = compute(c.name("bias"), "broadcast", DType::Int32, acc->shape, [&](const std::vector<Expr>& idx) {
      return at(acc, idx) + at(c.input(8), {idx[1]});
    });
  c.set_output(0, requantized_conv_output(c, acc, c.name(), ChannelLayout::nchw(c.out_shape(0)[1])));
}

}  // namespace

void register_conv_lowerings(LoweringRegistry& r) {
  register_int8_dot_conv_lowering(r);
  r.add({"Conv", "", lower_conv});
  r.add({"ConvTranspose", "", lower_conv_transpose});
  r.add({"ConvInteger", "", lower_conv_integer});
  r.add({"QLinearConv", "", lower_qlinear_conv});
}

}  // namespace kiln::te::nn_lower
