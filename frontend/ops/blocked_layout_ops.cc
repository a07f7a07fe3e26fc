// kiln's own ops for blocked activation layouts (domain "kiln"), which only the layout stage
// (frontend/layout/block_layout.h) creates:
//   ReorderToBlocked(x)          N x C x S...       -> N x ceil(C/b) x S... x b  (channels past C are 0)
//   ReorderFromBlocked(x)        N x Cb x S... x b  -> N x channels x S...
//   ConvBlocked(x, w[, bias])    N x Ci/bi x S... x bi, weights Co/bo x Ci/(G bi) x K... x bi x bo, bias Co/bo x bo
//                                -> N x Co/bo x O... x bo, with Conv's strides / pads / dilations (1 to 3
//                                spatial axes S..., as D x H x W for a 3-D conv) and `group` G (default 1):
//                                output block o reads the Ci/(G bi) input blocks of its group,
//                                o / (Co/(G bo)), so a group's channels fill whole blocks on both sides.
//   DepthwiseConvBlocked(x, w[, bias])  N x C/b x H x W x b, weights C/b x KH x KW x b, bias C/b x b
//                                -> N x C/b x OH x OW x b: channel c of the output reads channel c only.
//   MaxPoolBlocked(x), AveragePoolBlocked(x)  N x C/b x S... x b -> N x C/b x O... x b: MaxPool /
//                                AveragePool with their own attributes, channel by channel (MaxPool
//                                of 8-bit codes too).
//   QLinearConvBlocked(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point[, B])
//                                8-bit N x Cb x S... x b, QLinearConv's other inputs as they are (w: M x C x K...,
//                                C <= Cb b, one group), attribute block = b -> N x ceil(M/b) x O... x b:
//                                QLinearConv of the first C channels; padded outputs hold y's zero point.
//                                With nchw_input = 1, x is N x C x S... (only the output is blocked). Or
//                                depthwise (2-D, group = C = M, w: C x 1 x KH x KW) on blocks.
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

// x (N x C x S...) in blocks of b: N x ceil(C/b) x S... x b, channels past C zero.
Tensor to_blocked(const Tensor& x, int64_t b) {
  const int64_t channels = x.shape()[1];
  const Shape out_shape = to_blocked_shape(x.shape(), b);
  const int64_t plane = num_elements(Shape(x.shape().begin() + 2, x.shape().end()));
  Tensor y(x.dtype(), out_shape);
  for (int64_t n = 0; n < x.shape()[0]; ++n)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        y.set_double(((n * out_shape[1] + ch / b) * plane + p) * b + ch % b, x.get_double((n * channels + ch) * plane + p));
  return y;
}

// The first `channels` channels of blocked x (N x Cb x S... x b) as N x channels x S....
Tensor from_blocked(const Tensor& x, int64_t channels) {
  const Shape& xs = x.shape();
  const int64_t b = xs.back();
  const int64_t plane = num_elements(Shape(xs.begin() + 2, xs.end() - 1));
  Shape out{xs[0], channels};
  out.insert(out.end(), xs.begin() + 2, xs.end() - 1);
  Tensor y(x.dtype(), out);
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        y.set_double((n * channels + ch) * plane + p, x.get_double(((n * xs[1] + ch / b) * plane + p) * b + ch % b));
  return y;
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
  d.eval = [](EvalContext& c) { c.set_output(0, to_blocked(c.input(0), c.node().attr_int("block", 1))); };
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
  d.eval = [](EvalContext& c) { c.set_output(0, from_blocked(c.input(0), c.node().attr_int("channels", 1))); };
  return d;
}

// The window of a blocked conv over x's spatial axes (x: N x Cb x S... x b) with kernel extents `kernel`.
Window blocked_window(const Node& node, const Shape& x, std::vector<int64_t> kernel, bool allow_ceil_mode = false) {
  return forward_window(node, Shape(x.begin() + 2, x.end() - 1), std::move(kernel), allow_ceil_mode);
}

// The dtypes of a blocked conv's operands, and its bias (input 2), which must be `bias_shape`.
void check_blocked_conv_operands(const InferContext& c, const Shape& bias_shape) {
  if (!is_float(c.dtype(0)) || c.dtype(1) != c.dtype(0)) c.fail("X and W must have the same float dtype");
  if (c.has_input(2) && (c.shape(2) != bias_shape || c.dtype(2) != c.dtype(0)))
    c.fail("bias must be " + shape_str(bias_shape) + " of X's dtype");
}

// Calls f(tap, in) for every tap of the window (row-major over the kernel) at flat output position
// `out` that reads inside the input's spatial extents `in_spatial`, with `in` the flat input position;
// padding taps add nothing.
template <typename F>
void for_each_tap_inside(const Window& win, int64_t out, const Shape& in_spatial, F&& f) {
  const size_t rank = win.rank();
  int64_t o[3] = {0, 0, 0}, k[3] = {0, 0, 0};  // blocked convs have 1 to 3 spatial axes
  for (size_t a = rank; a-- > 0;) {
    o[a] = out % win.out[a];
    out /= win.out[a];
  }
  for (int64_t tap = 0; tap < win.kernel_size(); ++tap) {
    int64_t in = 0, rest = tap;
    for (size_t a = rank; a-- > 0;) {
      k[a] = rest % win.kernel[a];
      rest /= win.kernel[a];
    }
    bool inside = true;
    for (size_t a = 0; a < rank && inside; ++a) {
      const int64_t p = o[a] * win.strides[a] + k[a] * win.dilations[a] - win.pads_begin[a];
      inside = p >= 0 && p < in_spatial[a];
      in = in * in_spatial[a] + p;
    }
    if (inside) f(tap, in);
  }
}

// FLOPs of a blocked conv: a multiply-add per output element per `taps` products, plus the bias.
double blocked_conv_flops(const NodeShapes& s, int64_t taps) {
  double f = 2.0 * static_cast<double>(num_elements(s.out[0])) * static_cast<double>(taps);
  if (s.in.size() > 2 && !s.in[2].empty()) f += static_cast<double>(num_elements(s.out[0]));
  return f;
}

// The first input block output block `mo` of a blocked conv reads: its group's first, when `group`
// groups split `out_blocks` output blocks and each reads `group_blocks` input blocks.
int64_t first_input_block(int64_t mo, int64_t out_blocks, int64_t group, int64_t group_blocks) {
  return mo / (out_blocks / group) * group_blocks;
}

// X: N x Ci/bi x S1..Sk x bi; W: Co/bo x Ci/(G bi) x K1..Kk x bi x bo (k = 1, 2 or 3 spatial axes).
OpDef conv_blocked_op() {
  OpDef d;
  d.op_type = "ConvBlocked";
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "W");
    const Shape &x = c.shape(0), &w = c.shape(1);
    const int64_t group = c.node().attr_int("group", 1);
    if (group < 1) c.fail("attribute group must be positive");
    if (x.size() < 4 || x.size() > 6 || w.size() != x.size() + 1 || w[1] * group != x[1] || w[0] % group != 0 ||
        w[w.size() - 2] != x.back())
      c.fail("X " + shape_str(x) + " and W " + shape_str(w) + " are not N x Ci/bi x S... x bi and Co/bo x Ci/(" +
             std::to_string(group) + " bi) x K... x bi x bo");
    check_blocked_conv_operands(c, {w[0], w.back()});
    const Window win = blocked_window(c.node(), x, std::vector<int64_t>(w.begin() + 2, w.end() - 2));
    Shape out{x[0], w[0]};
    out.insert(out.end(), win.out.begin(), win.out.end());
    out.push_back(w.back());
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &w = c.input(1);
    const Shape &xs = x.shape(), &ws = w.shape();
    const Window win = blocked_window(c.node(), xs, std::vector<int64_t>(ws.begin() + 2, ws.end() - 2));
    const Shape in_spatial(xs.begin() + 2, xs.end() - 1);
    const int64_t bi = xs.back(), bo = ws.back(), cib = xs[1], cob = ws[0], gib = ws[1];
    const int64_t group = c.node().attr_int("group", 1);
    const int64_t in_plane = num_elements(in_spatial), out_plane = num_elements(win.out), taps = win.kernel_size();
    Shape out{xs[0], cob};
    out.insert(out.end(), win.out.begin(), win.out.end());
    out.push_back(bo);
    Tensor y(x.dtype(), out);
    int64_t at = 0;
    for (int64_t n = 0; n < xs[0]; ++n)
      for (int64_t mo = 0; mo < cob; ++mo)
        for (int64_t p = 0; p < out_plane; ++p)
          for (int64_t mi = 0; mi < bo; ++mi, ++at) {
            double acc = c.has_input(2) ? c.input(2).get_double(mo * bo + mi) : 0.0;
            const int64_t first = first_input_block(mo, cob, group, gib);
            for (int64_t co = 0; co < gib; ++co)
              for_each_tap_inside(win, p, in_spatial, [&](int64_t tap, int64_t in) {
                for (int64_t ci = 0; ci < bi; ++ci)
                  acc += x.get_double(((n * cib + first + co) * in_plane + in) * bi + ci) *
                         w.get_double((((mo * gib + co) * taps + tap) * bi + ci) * bo + mi);
              });
            y.set_double(at, acc);
          }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) {
    return blocked_conv_flops(s, num_elements(Shape(s.in[1].begin() + 1, s.in[1].end() - 1)));
  };
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
    const Window win = blocked_window(c.node(), x, {w[1], w[2]});
    c.set_output(0, c.dtype(0), {x[0], x[1], win.out[0], win.out[1], x[4]});
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &w = c.input(1);
    const Shape &xs = x.shape(), &ws = w.shape();
    const Window win = blocked_window(c.node(), xs, {ws[1], ws[2]});
    const Shape in_spatial{xs[2], xs[3]};
    const int64_t b = xs[4], in_plane = xs[2] * xs[3], out_plane = num_elements(win.out), taps = win.kernel_size();
    Tensor y(x.dtype(), {xs[0], xs[1], win.out[0], win.out[1], b});
    int64_t at = 0;
    for (int64_t n = 0; n < xs[0]; ++n)
      for (int64_t cb = 0; cb < xs[1]; ++cb)
        for (int64_t p = 0; p < out_plane; ++p)
          for (int64_t ci = 0; ci < b; ++ci, ++at) {
            double acc = c.has_input(2) ? c.input(2).get_double(cb * b + ci) : 0.0;
            for_each_tap_inside(win, p, in_spatial, [&](int64_t tap, int64_t in) {
              acc += x.get_double(((n * xs[1] + cb) * in_plane + in) * b + ci) * w.get_double((cb * taps + tap) * b + ci);
            });
            y.set_double(at, acc);
          }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return blocked_conv_flops(s, s.in[1][1] * s.in[1][2]); };
  return d;
}

// MaxPoolBlocked / AveragePoolBlocked: the ONNX pool (same attributes) over the spatial axes of a
// blocked tensor, each channel on its own; the reference computes it in NCHW.
OpDef blocked_pool_op(const char* op_type, Tensor (*reference)(const Node&, const Tensor&), double per_output) {
  OpDef d;
  d.op_type = op_type;
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    const Shape& x = c.shape(0);
    if (x.size() < 4 || x.size() > 6) c.fail("X must be N x C/b x S... x b with 1 to 3 spatial axes, got " + shape_str(x));
    const bool codes = c.node().op_type == "MaxPoolBlocked" && (c.dtype(0) == DType::UInt8 || c.dtype(0) == DType::Int8);
    if (!is_float(c.dtype(0)) && !codes) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    const Window win = blocked_window(c.node(), x, c.node().required_ints("kernel_shape"), true);
    Shape out{x[0], x[1]};
    out.insert(out.end(), win.out.begin(), win.out.end());
    out.push_back(x.back());
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [reference](EvalContext& c) {
    const Tensor& x = c.input(0);
    c.set_output(0, to_blocked(reference(c.node(), from_blocked(x, x.shape()[1] * x.shape().back())), x.shape().back()));
  };
  d.flops = [per_output](const NodeShapes& s) {
    double taps = 1;
    for (int64_t k : s.node.attr_ints("kernel_shape")) taps *= static_cast<double>(k);
    return static_cast<double>(num_elements(s.out[0])) * (taps + per_output);
  };
  return d;
}

Tensor max_pool_values(const Node& node, const Tensor& x) { return max_pool_reference(node, x); }

// An int8 conv over blocked codes (frontend/layout/block_layout.h): the reference is QLinearConv's,
// on the blocks' first C channels.
OpDef qlinear_conv_blocked_op() {
  OpDef d;
  d.op_type = "QLinearConvBlocked";
  d.domain = kDomain;
  d.infer = [](InferContext& c) {
    const char* names[] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
    for (size_t i = 0; i < 8; ++i) c.require_input(i, names[i]);
    const Shape &x = c.shape(0), &w = c.shape(3);
    const int64_t b = positive_attr(c, "block");
    const bool nchw = c.node().attr_int("nchw_input", 0) != 0;
    const int64_t group = c.node().attr_int("group", 1);
    const bool depthwise = group != 1 && !nchw && x.size() == 5 && w.size() == 4 && w[1] == 1 && w[0] == group;
    if ((nchw ? (x.size() < 3 || x.size() > 5 || w.size() != x.size() || w[1] != x[1])
              : (x.size() < 4 || x.size() > 6 || w.size() + 1 != x.size() || x.back() != b || w[1] * group > x[1] * b)) ||
        (group != 1 && !depthwise))
      c.fail("x " + shape_str(x) + " and w " + shape_str(w) + " are not " + (nchw ? "N x C x S..." : "N x Cb x S... x " + std::to_string(b)) +
             " and M x C x K... with C <= Cb x " + std::to_string(b) + " in one group, or a depthwise 2-D conv on blocks");
    for (size_t i : {size_t{0}, size_t{3}, size_t{7}})
      if (c.dtype(i) != DType::UInt8 && c.dtype(i) != DType::Int8) c.unsupported("dtype " + dtype_name(c.dtype(i)) + " is not supported");
    const Window win = forward_window(c.node(), Shape(x.begin() + 2, x.end() - (nchw ? 0 : 1)), std::vector<int64_t>(w.begin() + 2, w.end()), false);
    Shape out{x[0], (w[0] + b - 1) / b};
    out.insert(out.end(), win.out.begin(), win.out.end());
    out.push_back(b);
    c.set_output(0, c.dtype(7), out);
  };
  d.eval = [](EvalContext& c) {
    const int64_t b = c.node().attr_int("block", 1);
    const int64_t channels_in = c.input(3).shape()[1] * c.node().attr_int("group", 1);
    const Tensor x = c.node().attr_int("nchw_input", 0) ? c.input(0) : from_blocked(c.input(0), channels_in);
    std::vector<const Tensor*> ins{&x};
    for (size_t i = 1; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? &c.input(i) : nullptr);
    EvalContext nchw(c.node(), ins);
    find_op("", "QLinearConv")->eval(nchw);
    const Tensor& y = nchw.outputs().at(0);
    Tensor blocked = to_blocked(y, b);
    const int64_t channels = y.shape()[1], zero = c.input(7).get_int(0), plane = blocked.size() / (blocked.shape()[0] * blocked.shape()[1] * b);
    for (int64_t i = 0; i < blocked.size(); ++i) {
      const int64_t block = (i / (plane * b)) % blocked.shape()[1];
      if (block * b + i % b >= channels) blocked.set_int(i, zero);
    }
    c.set_output(0, std::move(blocked));
  };
  d.flops = [](const NodeShapes& s) {
    const Shape& w = s.in[3];
    return 2.0 * static_cast<double>(num_elements(s.out[0])) * static_cast<double>(num_elements(Shape(w.begin() + 1, w.end())));
  };
  return d;
}

}  // namespace

void register_blocked_layout_ops(OpRegistry& r) {
  r.add(blocked_pool_op("MaxPoolBlocked", max_pool_values, 0));
  r.add(blocked_pool_op("AveragePoolBlocked", average_pool_reference, 1));
  r.add(depthwise_conv_blocked_op());
  r.add(reorder_to_blocked_op());
  r.add(reorder_from_blocked_op());
  r.add(conv_blocked_op());
  r.add(qlinear_conv_blocked_op());
}

}  // namespace kiln::nn
