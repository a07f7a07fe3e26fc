// kiln's own ops for blocked activation layouts (domain "kiln"), which only the layout stage
// (frontend/layout/block_layout.h) creates:
//   ReorderToBlocked(x)          N x C x S...       -> N x ceil(C/b) x S... x b  (channels past C are 0)
//   ReorderFromBlocked(x)        N x Cb x S... x b  -> N x channels x S...
//   ConvBlocked(x, w[, bias])    N x Ci/bi x H x W x bi, weights Co/bo x Ci/bi x KH x KW x bi x bo, bias Co/bo x bo
//                                -> N x Co/bo x OH x OW x bo, with Conv's strides / pads / dilations.
//   DepthwiseConvBlocked(x, w[, bias])  N x C/b x H x W x b, weights C/b x KH x KW x b, bias C/b x b
//                                -> N x C/b x OH x OW x b: channel c of the output reads channel c only.
// Channel c of a blocked tensor is element c % b of block c / b, so a vector of b channels is
// contiguous, and a convolution's weights are stored in the order its inner loop reads them.
#include "frontend/ops/nn_common.h"

namespace kiln::nn {
namespace {

constexpr const char* kDomain = "kiln";

int64_t positive_attr(const InferContext& c, const char* name) {
  if (!c.node().has_attr(name)) c.fail(std::string("attribute ") + name + " is required");
  const int64_t v = c.node().attr_int(name, 0);
  if (v < 1) c.fail(std::string("attribute ") + name + " must be positive");
  return v;
}

Shape to_blocked_shape(const Shape& x, int64_t block) {
  Shape s{x[0], (x[1] + block - 1) / block};
  s.insert(s.end(), x.begin() + 2, x.end());
  s.push_back(block);
  return s;
}

OpDef reorder_to_blocked_op() {
  OpDef d;
  d.op_type = "ReorderToBlocked";
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (c.rank(0) < 3) c.fail("X must be N x C x spatial..., got " + shape_str(c.shape(0)));
    c.set_output(0, c.dtype(0), to_blocked_shape(c.shape(0), positive_attr(c, "block")));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const int64_t b = c.node().attr_int("block", 1), channels = x.shape()[1];
    const Shape out_shape = to_blocked_shape(x.shape(), b);
    const int64_t plane = num_elements(Shape(x.shape().begin() + 2, x.shape().end()));
    Tensor y(x.dtype(), out_shape);
    for (int64_t n = 0; n < x.shape()[0]; ++n)
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t p = 0; p < plane; ++p)
          y.set_double(((n * out_shape[1] + ch / b) * plane + p) * b + ch % b, x.get_double((n * channels + ch) * plane + p));
    c.set_output(0, std::move(y));
  };
  return d;
}

OpDef reorder_from_blocked_op() {
  OpDef d;
  d.op_type = "ReorderFromBlocked";
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    const Shape& x = c.shape(0);
    if (x.size() < 4) c.fail("X must be N x C/b x spatial... x b, got " + shape_str(x));
    const int64_t channels = positive_attr(c, "channels"), b = x.back();
    if ((channels + b - 1) / b != x[1])
      c.fail(std::to_string(channels) + " channels do not fill " + std::to_string(x[1]) + " blocks of " + std::to_string(b));
    Shape out{x[0], channels};
    out.insert(out.end(), x.begin() + 2, x.end() - 1);
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Shape& xs = x.shape();
    const int64_t channels = c.node().attr_int("channels", 1), b = xs.back();
    const int64_t plane = num_elements(Shape(xs.begin() + 2, xs.end() - 1));
    Shape out{xs[0], channels};
    out.insert(out.end(), xs.begin() + 2, xs.end() - 1);
    Tensor y(x.dtype(), out);
    for (int64_t n = 0; n < xs[0]; ++n)
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t p = 0; p < plane; ++p)
          y.set_double((n * channels + ch) * plane + p, x.get_double(((n * xs[1] + ch / b) * plane + p) * b + ch % b));
    c.set_output(0, std::move(y));
  };
  return d;
}

// The window of a blocked conv with a kh x kw kernel over x's H x W.
Window blocked_window(const Node& node, const Shape& x, int64_t kh, int64_t kw) {
  return forward_window(node, {x[2], x[3]}, {kh, kw}, false);
}

Shape blocked_conv_out(const Shape& x, const Shape& w, const Window& win) { return {x[0], w[0], win.out[0], win.out[1], w[5]}; }

// The dtypes of a blocked conv's operands, and its bias (input 2), which must be `bias_shape`.
void check_blocked_conv_operands(const InferContext& c, const Shape& bias_shape) {
  if (!is_float(c.dtype(0)) || c.dtype(1) != c.dtype(0)) c.fail("X and W must have the same float dtype");
  if (c.has_input(2) && (c.shape(2) != bias_shape || c.dtype(2) != c.dtype(0)))
    c.fail("bias must be " + shape_str(bias_shape) + " of X's dtype");
}

// Calls f(kh, kw, ih, iw) for every tap of the window at output (oh, ow) that reads inside the
// H x W input (ih, iw); padding taps add nothing.
template <typename F>
void for_each_tap_inside(const Window& win, int64_t oh, int64_t ow, int64_t h, int64_t w, F&& f) {
  for (int64_t kh = 0; kh < win.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < win.kernel[1]; ++kw) {
      const int64_t ih = oh * win.strides[0] + kh * win.dilations[0] - win.pads_begin[0];
      const int64_t iw = ow * win.strides[1] + kw * win.dilations[1] - win.pads_begin[1];
      if (ih >= 0 && ih < h && iw >= 0 && iw < w) f(kh, kw, ih, iw);
    }
}

// FLOPs of a blocked conv: a multiply-add per output element per `taps` products, plus the bias.
double blocked_conv_flops(const NodeShapes& s, int64_t taps) {
  double f = 2.0 * static_cast<double>(num_elements(s.out[0])) * static_cast<double>(taps);
  if (s.in.size() > 2 && !s.in[2].empty()) f += static_cast<double>(num_elements(s.out[0]));
  return f;
}

OpDef conv_blocked_op() {
  OpDef d;
  d.op_type = "ConvBlocked";
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "W");
    const Shape &x = c.shape(0), &w = c.shape(1);
    if (x.size() != 5 || w.size() != 6 || w[1] != x[1] || w[4] != x[4])
      c.fail("X " + shape_str(x) + " and W " + shape_str(w) + " are not N x Ci/bi x H x W x bi and Co/bo x Ci/bi x KH x KW x bi x bo");
    check_blocked_conv_operands(c, {w[0], w[5]});
    c.set_output(0, c.dtype(0), blocked_conv_out(x, w, blocked_window(c.node(), x, w[2], w[3])));
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &w = c.input(1);
    const Shape &xs = x.shape(), &ws = w.shape();
    const Window win = blocked_window(c.node(), xs, ws[2], ws[3]);
    const Shape out = blocked_conv_out(xs, ws, win);
    const int64_t bi = xs[4], bo = ws[5];
    Tensor y(x.dtype(), out);
    int64_t at = 0;
    for (int64_t n = 0; n < out[0]; ++n)
      for (int64_t mo = 0; mo < out[1]; ++mo)
        for (int64_t oh = 0; oh < out[2]; ++oh)
          for (int64_t ow = 0; ow < out[3]; ++ow)
            for (int64_t mi = 0; mi < bo; ++mi, ++at) {
              double acc = c.has_input(2) ? c.input(2).get_double(mo * bo + mi) : 0.0;
              for (int64_t co = 0; co < xs[1]; ++co)
                for_each_tap_inside(win, oh, ow, xs[2], xs[3], [&](int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
                  for (int64_t ci = 0; ci < bi; ++ci)
                    acc += x.get_double((((n * xs[1] + co) * xs[2] + ih) * xs[3] + iw) * bi + ci) *
                           w.get_double(((((mo * ws[1] + co) * ws[2] + kh) * ws[3] + kw) * bi + ci) * bo + mi);
                });
              y.set_double(at, acc);
            }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return blocked_conv_flops(s, s.in[1][1] * s.in[1][2] * s.in[1][3] * s.in[1][4]); };
  return d;
}

OpDef depthwise_conv_blocked_op() {
  OpDef d;
  d.op_type = "DepthwiseConvBlocked";
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "W");
    const Shape &x = c.shape(0), &w = c.shape(1);
    if (x.size() != 5 || w.size() != 4 || w[0] != x[1] || w[3] != x[4])
      c.fail("X " + shape_str(x) + " and W " + shape_str(w) + " are not N x C/b x H x W x b and C/b x KH x KW x b");
    check_blocked_conv_operands(c, {w[0], w[3]});
    const Window win = blocked_window(c.node(), x, w[1], w[2]);
    c.set_output(0, c.dtype(0), {x[0], x[1], win.out[0], win.out[1], x[4]});
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &w = c.input(1);
    const Shape &xs = x.shape(), &ws = w.shape();
    const Window win = blocked_window(c.node(), xs, ws[1], ws[2]);
    const int64_t b = xs[4];
    Tensor y(x.dtype(), {xs[0], xs[1], win.out[0], win.out[1], b});
    int64_t at = 0;
    for (int64_t n = 0; n < xs[0]; ++n)
      for (int64_t cb = 0; cb < xs[1]; ++cb)
        for (int64_t oh = 0; oh < win.out[0]; ++oh)
          for (int64_t ow = 0; ow < win.out[1]; ++ow)
            for (int64_t ci = 0; ci < b; ++ci, ++at) {
              double acc = c.has_input(2) ? c.input(2).get_double(cb * b + ci) : 0.0;
              for_each_tap_inside(win, oh, ow, xs[2], xs[3], [&](int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
                acc += x.get_double((((n * xs[1] + cb) * xs[2] + ih) * xs[3] + iw) * b + ci) *
                       w.get_double(((cb * ws[1] + kh) * ws[2] + kw) * b + ci);
              });
              y.set_double(at, acc);
            }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return blocked_conv_flops(s, s.in[1][1] * s.in[1][2]); };
  return d;
}

}  // namespace

void register_blocked_layout_ops(OpRegistry& r) {
  r.add(depthwise_conv_blocked_op());
  r.add(reorder_to_blocked_op());
  r.add(reorder_from_blocked_op());
  r.add(conv_blocked_op());
}

}  // namespace kiln::nn
