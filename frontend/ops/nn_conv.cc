// Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv.
//
// The kernels work on whole planes: for one (output channel, input channel, kernel tap) they add
// weight * shifted input plane into the output plane. The valid range of every axis is computed once
// per tap, so the innermost loop is a branch-free strided multiply-add (what makes a reference
// convolution of a real detector model take well under a second or two).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "frontend/ops/nn_common.h"
#include "frontend/ops/axes_and_broadcast.h"
#include "frontend/ops/linalg_internal.h"

namespace kiln::nn {
namespace {

// Sweeps one kernel tap over the spatial axes. "Iterated" positions p (conv: output, transpose: input)
// pair with "partner" positions p * stride + k * dilation - pad_begin (conv: input, transpose:
// output); only pairs whose partner lies inside its extents take part.
class TapSweep {
 public:
  TapSweep(const Window& w, const Shape& iter, const Shape& partner)
      : w_(w), iter_(iter), partner_(partner), iter_strides_(strides_of(iter)), partner_strides_(strides_of(partner)) {
    size_t r = w.rank();
    lo_.resize(r);
    hi_.resize(r);
    for (size_t a = 0; a < r; ++a) {
      for (int64_t k = 0; k < w.kernel[a]; ++k) {
        int64_t offset = k * w.dilations[a] - w.pads_begin[a];
        int64_t lo = std::max<int64_t>(0, ceil_div(-offset, w.strides[a]));
        int64_t hi = std::min<int64_t>(iter[a], floor_div(partner[a] - 1 - offset, w.strides[a]) + 1);
        lo_[a].push_back(lo);
        hi_[a].push_back(std::max(lo, hi));
      }
    }
    pos_.resize(r);
  }

  // Calls fn(iter_start, partner_start, count, partner_step) for every run of the innermost axis that
  // the tap with kernel index `kidx` touches.
  template <typename Fn>
  void for_each_run(const std::vector<int64_t>& kidx, Fn&& fn) {
    size_t r = w_.rank();
    for (size_t a = 0; a < r; ++a) {
      if (lo_[a][kidx[a]] >= hi_[a][kidx[a]]) return;
      pos_[a] = lo_[a][kidx[a]];
    }
    size_t last = r - 1;
    int64_t count = hi_[last][kidx[last]] - lo_[last][kidx[last]];
    for (;;) {
      int64_t iter_off = 0, partner_off = 0;
      for (size_t a = 0; a < r; ++a) {
        iter_off += pos_[a] * iter_strides_[a];
        partner_off += (pos_[a] * w_.strides[a] + kidx[a] * w_.dilations[a] - w_.pads_begin[a]) * partner_strides_[a];
      }
      fn(iter_off, partner_off, count, w_.strides[last]);
      // Advance the outer axes (all but the innermost) within their valid ranges.
      size_t a = last;
      for (;;) {
        if (a == 0) return;
        --a;
        if (++pos_[a] < hi_[a][kidx[a]]) break;
        pos_[a] = lo_[a][kidx[a]];
      }
    }
  }

 private:
  const Window& w_;
  Shape iter_, partner_;
  std::vector<int64_t> iter_strides_, partner_strides_;
  std::vector<std::vector<int64_t>> lo_, hi_;
  std::vector<int64_t> pos_;
};

// Shapes and window of a Conv-like node (Conv, ConvInteger, QLinearConv): X is N x C x D..., W is
// M x C/group x K....
struct ConvShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  Shape in_spatial;
  Window window;
  Shape out_shape() const {
    Shape s{batch, out_channels};
    s.insert(s.end(), window.out.begin(), window.out.end());
    return s;
  }
};

ConvShape conv_shape(const Node& node, const Shape& x, const Shape& w) {
  ConvShape cs;
  cs.in_spatial = spatial_dims(node, x, "input X");
  if (w.size() != x.size())
    fail(node, "weights W have rank " + std::to_string(w.size()) + ", expected " + std::to_string(x.size()));
  cs.batch = x[0];
  cs.in_channels = x[1];
  cs.out_channels = w[0];
  cs.group = node.attr_int("group", 1);
  if (cs.group < 1) fail(node, "group must be positive");
  if (cs.in_channels % cs.group != 0 || cs.out_channels % cs.group != 0)
    fail(node, "group " + std::to_string(cs.group) + " does not divide the channels (" +
                   std::to_string(cs.in_channels) + " in, " + std::to_string(cs.out_channels) + " out)");
  if (w[1] * cs.group != cs.in_channels)
    fail(node, "weights " + shape_str(w) + " do not match " + std::to_string(cs.in_channels) + " input channels in " +
                   std::to_string(cs.group) + " groups");
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (node.has_attr("kernel_shape") && node.attr_ints("kernel_shape") != kernel)
    fail(node, "attribute kernel_shape does not match the weights " + shape_str(w));
  cs.window = forward_window(node, cs.in_spatial, kernel, false);
  return cs;
}

// y[n, m] += sum over c in m's group and kernel taps of w[m, c, k] * x[n, c, shifted by k]; y holds the
// bias (or zeros) on entry. T is double for float convolutions and int64_t for integer ones.
template <typename T>
void conv_accumulate(const ConvShape& cs, const std::vector<T>& x, const std::vector<T>& w, std::vector<T>& y) {
  const Window& win = cs.window;
  int64_t in_size = num_elements(cs.in_spatial), out_size = num_elements(win.out);
  int64_t ksize = win.kernel_size();
  int64_t cg_count = cs.in_channels / cs.group, mg_count = cs.out_channels / cs.group;
  TapSweep sweep(win, win.out, cs.in_spatial);
  std::vector<int64_t> kidx(win.rank());
  for (int64_t n = 0; n < cs.batch; ++n) {
    for (int64_t m = 0; m < cs.out_channels; ++m) {
      int64_t g = m / mg_count;
      T* yp = y.data() + (n * cs.out_channels + m) * out_size;
      for (int64_t cg = 0; cg < cg_count; ++cg) {
        const T* xp = x.data() + (n * cs.in_channels + g * cg_count + cg) * in_size;
        const T* wp = w.data() + (m * cg_count + cg) * ksize;
        std::fill(kidx.begin(), kidx.end(), 0);
        for (int64_t k = 0; k < ksize; ++k, next_index(kidx, win.kernel)) {
          T wv = wp[k];
          sweep.for_each_run(kidx, [&](int64_t out_at, int64_t in_at, int64_t count, int64_t step) {
            T* yr = yp + out_at;
            const T* xr = xp + in_at;
            for (int64_t j = 0; j < count; ++j) yr[j] += wv * xr[j * step];
          });
        }
      }
    }
  }
}

// Fills an N x M x spatial buffer with a per-channel bias (or zeros without one).
template <typename T>
std::vector<T> bias_filled(const Shape& out, const Tensor* bias) {
  std::vector<T> y(static_cast<size_t>(num_elements(out)), T{0});
  if (!bias) return y;
  int64_t plane = num_elements(Shape(out.begin() + 2, out.end()));
  for (int64_t n = 0; n < out[0]; ++n)
    for (int64_t m = 0; m < out[1]; ++m) {
      T b;
      if constexpr (std::is_floating_point_v<T>) b = bias->get_double(m);
      else b = bias->get_int(m);
      std::fill_n(y.begin() + (n * out[1] + m) * plane, plane, b);
    }
  return y;
}

void check_bias(const InferContext& c, size_t input, int64_t channels, DType want) {
  if (!c.has_input(input)) return;
  if (c.shape(input) != Shape{channels})
    c.fail("bias has shape " + shape_str(c.shape(input)) + ", expected " + std::to_string(channels));
  if (c.dtype(input) != want) c.fail("bias has dtype " + dtype_name(c.dtype(input)) + ", expected " + dtype_name(want));
}

void require_float(const InferContext& c, size_t input) {
  if (!is_float(c.dtype(input))) c.unsupported("dtype " + dtype_name(c.dtype(input)) + " is not supported");
}

// Multiply-adds of a conv: every output element sums (C/group) x kernel products.
double conv_macs(const Shape& out, const Shape& w) {
  return static_cast<double>(num_elements(out)) * static_cast<double>(num_elements(Shape(w.begin() + 1, w.end())));
}

OpDef conv_op() {
  OpDef d;
  d.op_type = "Conv";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "W");
    require_float(c, 0);
    if (c.dtype(1) != c.dtype(0)) c.fail("W has dtype " + dtype_name(c.dtype(1)) + ", X has " + dtype_name(c.dtype(0)));
    ConvShape cs = conv_shape(c.node(), c.shape(0), c.shape(1));
    check_bias(c, 2, cs.out_channels, c.dtype(0));
    c.set_output(0, c.dtype(0), cs.out_shape());
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    ConvShape cs = conv_shape(c.node(), x.shape(), c.input(1).shape());
    std::vector<double> y = bias_filled<double>(cs.out_shape(), c.has_input(2) ? &c.input(2) : nullptr);
    conv_accumulate(cs, x.to_doubles(), c.input(1).to_doubles(), y);
    c.set_output(0, Tensor::from_doubles(x.dtype(), cs.out_shape(), y));
  };
  d.flops = [](const NodeShapes& s) {
    double f = 2 * conv_macs(s.out[0], s.in[1]);
    if (s.in.size() > 2 && !s.in[2].empty()) f += static_cast<double>(num_elements(s.out[0]));
    return f;
  };
  return d;
}

// ---- ConvTranspose ----------------------------------------------------------------------------

// X is N x C x D..., W is C x M/group x K...; output position i * stride + k * dilation - pad_begin.
struct ConvTransposeShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  Shape in_spatial;
  Window window;  // `out` holds the output extents
  Shape out_shape() const {
    Shape s{batch, out_channels};
    s.insert(s.end(), window.out.begin(), window.out.end());
    return s;
  }
};

ConvTransposeShape conv_transpose_shape(const Node& node, const Shape& x, const Shape& w) {
  ConvTransposeShape cs;
  cs.in_spatial = spatial_dims(node, x, "input X");
  size_t r = cs.in_spatial.size();
  if (w.size() != x.size())
    fail(node, "weights W have rank " + std::to_string(w.size()) + ", expected " + std::to_string(x.size()));
  cs.batch = x[0];
  cs.in_channels = x[1];
  cs.group = node.attr_int("group", 1);
  if (cs.group < 1) fail(node, "group must be positive");
  if (w[0] != cs.in_channels || cs.in_channels % cs.group != 0)
    fail(node, "weights " + shape_str(w) + " do not match " + std::to_string(cs.in_channels) + " input channels in " +
                   std::to_string(cs.group) + " groups");
  cs.out_channels = w[1] * cs.group;

  Window& win = cs.window;
  win.kernel.assign(w.begin() + 2, w.end());
  if (node.has_attr("kernel_shape") && node.attr_ints("kernel_shape") != win.kernel)
    fail(node, "attribute kernel_shape does not match the weights " + shape_str(w));
  win.strides = spatial_attr(node, "strides", r, 1, 1);
  win.dilations = spatial_attr(node, "dilations", r, 1, 1);
  std::vector<int64_t> output_padding = spatial_attr(node, "output_padding", r, 0, 0);
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID")
    fail(node, "unknown auto_pad '" + auto_pad + "'");
  // The extent covered when every input position scatters its full kernel, before any cropping.
  std::vector<int64_t> full(r);
  for (size_t a = 0; a < r; ++a) full[a] = win.strides[a] * (cs.in_spatial[a] - 1) + output_padding[a] + win.span(a);

  std::vector<int64_t> target;
  if (node.has_attr("output_shape")) {
    target = node.attr_ints("output_shape");
    if (target.size() == r + 2) target.erase(target.begin(), target.begin() + 2);  // given with N and C
    if (target.size() != r) fail(node, "attribute output_shape must have one value per spatial axis");
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < r; ++a) target.push_back(cs.in_spatial[a] * win.strides[a]);
  }
  win.pads_begin.assign(r, 0);
  win.pads_end.assign(r, 0);
  if (!target.empty()) {
    // Crop (or extend, when negative) the full extent to the target; SAME_UPPER puts the odd element
    // of padding at the end, every other mode at the start (as the ONNX spec writes it).
    for (size_t a = 0; a < r; ++a) {
      int64_t total = full[a] - target[a];
      int64_t half = floor_div(total, 2);
      win.pads_begin[a] = auto_pad == "SAME_UPPER" ? half : total - half;
      win.pads_end[a] = total - win.pads_begin[a];
    }
  } else if (auto_pad == "NOTSET" && node.has_attr("pads")) {
    std::vector<int64_t> pads = node.attr_ints("pads");
    if (pads.size() != 2 * r)
      fail(node, "attribute 'pads' has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * r));
    for (int64_t p : pads)
      if (p < 0) fail(node, "negative pads are not supported");
    win.pads_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(r));
    win.pads_end.assign(pads.begin() + static_cast<int64_t>(r), pads.end());
  }
  win.out.resize(r);
  for (size_t a = 0; a < r; ++a) {
    win.out[a] = full[a] - win.pads_begin[a] - win.pads_end[a];
    if (win.out[a] < 1) fail(node, "pads leave no output on spatial axis " + std::to_string(a));
  }
  return cs;
}

// y[n, m, i * s + k * d - p] += x[n, c, i] * w[c, m - group offset, k] for every c in m's group.
void conv_transpose_accumulate(const ConvTransposeShape& cs, const std::vector<double>& x,
                               const std::vector<double>& w, std::vector<double>& y) {
  const Window& win = cs.window;
  int64_t in_size = num_elements(cs.in_spatial), out_size = num_elements(win.out);
  int64_t ksize = win.kernel_size();
  int64_t cg_count = cs.in_channels / cs.group, mg_count = cs.out_channels / cs.group;
  TapSweep sweep(win, cs.in_spatial, win.out);
  std::vector<int64_t> kidx(win.rank());
  for (int64_t n = 0; n < cs.batch; ++n) {
    for (int64_t c = 0; c < cs.in_channels; ++c) {
      int64_t g = c / cg_count;
      const double* xp = x.data() + (n * cs.in_channels + c) * in_size;
      for (int64_t mg = 0; mg < mg_count; ++mg) {
        double* yp = y.data() + (n * cs.out_channels + g * mg_count + mg) * out_size;
        const double* wp = w.data() + (c * mg_count + mg) * ksize;
        std::fill(kidx.begin(), kidx.end(), 0);
        for (int64_t k = 0; k < ksize; ++k, next_index(kidx, win.kernel)) {
          double wv = wp[k];
          sweep.for_each_run(kidx, [&](int64_t in_at, int64_t out_at, int64_t count, int64_t step) {
            const double* xr = xp + in_at;
            double* yr = yp + out_at;
            for (int64_t j = 0; j < count; ++j) yr[j * step] += wv * xr[j];
          });
        }
      }
    }
  }
}

OpDef conv_transpose_op() {
  OpDef d;
  d.op_type = "ConvTranspose";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "W");
    require_float(c, 0);
    if (c.dtype(1) != c.dtype(0)) c.fail("W has dtype " + dtype_name(c.dtype(1)) + ", X has " + dtype_name(c.dtype(0)));
    ConvTransposeShape cs = conv_transpose_shape(c.node(), c.shape(0), c.shape(1));
    check_bias(c, 2, cs.out_channels, c.dtype(0));
    c.set_output(0, c.dtype(0), cs.out_shape());
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    ConvTransposeShape cs = conv_transpose_shape(c.node(), x.shape(), c.input(1).shape());
    std::vector<double> y = bias_filled<double>(cs.out_shape(), c.has_input(2) ? &c.input(2) : nullptr);
    conv_transpose_accumulate(cs, x.to_doubles(), c.input(1).to_doubles(), y);
    c.set_output(0, Tensor::from_doubles(x.dtype(), cs.out_shape(), y));
  };
  d.flops = [](const NodeShapes& s) {
    // Every input element scatters M/group x kernel products.
    double f = 2 * conv_macs(s.in[0], s.in[1]);
    if (s.in.size() > 2 && !s.in[2].empty()) f += static_cast<double>(num_elements(s.out[0]));
    return f;
  };
  return d;
}

// ---- Quantized convolutions -------------------------------------------------------------------

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// A zero point (or scale) input: absent, one value for the tensor, or (when `per_channel` > 0) one
// value per output channel.
void check_quant_param(const InferContext& c, size_t input, const char* what, DType want, int64_t per_channel) {
  if (!c.has_input(input)) return;
  if (c.dtype(input) != want)
    c.fail(std::string(what) + " has dtype " + dtype_name(c.dtype(input)) + ", expected " + dtype_name(want));
  int64_t n = num_elements(c.shape(input));
  if (c.rank(input) > 1 || (n != 1 && n != per_channel))
    c.fail(std::string(what) + " has shape " + shape_str(c.shape(input)) + ", expected a scalar" +
           (per_channel > 0 ? " or " + std::to_string(per_channel) + " values" : std::string()));
}

// The quantized tensor minus its zero point (0 when absent), as int64.
std::vector<int64_t> dequantized_ints(const Tensor& t, const Tensor* zero_point, int64_t channel_size) {
  std::vector<int64_t> v = t.to_ints();
  if (!zero_point) return v;
  bool per_channel = zero_point->size() > 1;
  for (size_t i = 0; i < v.size(); ++i)
    v[i] -= zero_point->get_int(per_channel ? static_cast<int64_t>(i) / channel_size : 0);
  return v;
}

std::vector<int64_t> integer_conv(const EvalContext& c, const ConvShape& cs, size_t x_in, size_t x_zp, size_t w_in,
                                  size_t w_zp, const Tensor* bias) {
  const Tensor& w = c.input(w_in);
  std::vector<int64_t> x = dequantized_ints(c.input(x_in), c.has_input(x_zp) ? &c.input(x_zp) : nullptr, 1);
  std::vector<int64_t> wq =
      dequantized_ints(w, c.has_input(w_zp) ? &c.input(w_zp) : nullptr, num_elements(w.shape()) / cs.out_channels);
  std::vector<int64_t> y = bias_filled<int64_t>(cs.out_shape(), bias);
  conv_accumulate(cs, x, wq, y);
  return y;
}

OpDef conv_integer_op() {
  OpDef d;
  d.op_type = "ConvInteger";
  d.infer = [](InferContext& c) {
    c.require_input(0, "x");
    c.require_input(1, "w");
    if (!is_8bit(c.dtype(0)) || !is_8bit(c.dtype(1)))
      c.unsupported("dtypes " + dtype_name(c.dtype(0)) + " x " + dtype_name(c.dtype(1)) + " are not supported");
    ConvShape cs = conv_shape(c.node(), c.shape(0), c.shape(1));
    check_quant_param(c, 2, "x_zero_point", c.dtype(0), 0);
    check_quant_param(c, 3, "w_zero_point", c.dtype(1), cs.out_channels);
    c.set_output(0, DType::Int32, cs.out_shape());
  };
  d.eval = [](EvalContext& c) {
    ConvShape cs = conv_shape(c.node(), c.input(0).shape(), c.input(1).shape());
    std::vector<int64_t> y = integer_conv(c, cs, 0, 2, 1, 3, nullptr);
    c.set_output(0, Tensor::from_ints(DType::Int32, cs.out_shape(), y));
  };
  d.flops = [](const NodeShapes& s) { return 2 * conv_macs(s.out[0], s.in[1]); };
  return d;
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
// kiln.QLinearConvDot4 (frontend/layout/int8_dot_layout.h) is the same op, whose lowering reduces
// four input channels per step: it computes the same integers.
OpDef qlinear_conv_op(const char* op_type, const char* domain) {
  OpDef d;
  d.op_type = op_type;
  d.domain = domain;
  d.infer = [](InferContext& c) {
    const char* names[] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
    for (size_t i = 0; i < 8; ++i) c.require_input(i, names[i]);
    if (!is_8bit(c.dtype(0)) || !is_8bit(c.dtype(3)) || !is_8bit(c.dtype(7)))
      c.unsupported("dtypes " + dtype_name(c.dtype(0)) + " x " + dtype_name(c.dtype(3)) + " -> " +
                    dtype_name(c.dtype(7)) + " are not supported");
    ConvShape cs = conv_shape(c.node(), c.shape(0), c.shape(3));
    check_quant_param(c, 1, "x_scale", DType::Float32, 0);
    check_quant_param(c, 2, "x_zero_point", c.dtype(0), 0);
    check_quant_param(c, 4, "w_scale", DType::Float32, cs.out_channels);
    check_quant_param(c, 5, "w_zero_point", c.dtype(3), cs.out_channels);
    check_quant_param(c, 6, "y_scale", DType::Float32, 0);
    check_quant_param(c, 7, "y_zero_point", c.dtype(7), 0);
    check_bias(c, 8, cs.out_channels, DType::Int32);
    c.set_output(0, c.dtype(7), cs.out_shape());
  };
  d.eval = [](EvalContext& c) {
    ConvShape cs = conv_shape(c.node(), c.input(0).shape(), c.input(3).shape());
    std::vector<int64_t> acc = integer_conv(c, cs, 0, 2, 3, 5, c.has_input(8) ? &c.input(8) : nullptr);
    const Tensor& w_scale = c.input(4);
    float x_scale = static_cast<float>(c.input(1).get_double(0));
    float y_scale = static_cast<float>(c.input(6).get_double(0));
    double y_zero = static_cast<double>(c.input(7).get_int(0));
    DType out_type = c.input(7).dtype();
    double lowest = out_type == DType::Int8 ? -128 : 0, highest = out_type == DType::Int8 ? 127 : 255;
    Shape out = cs.out_shape();
    int64_t plane = num_elements(cs.window.out);
    Tensor y(out_type, out);
    for (int64_t i = 0; i < y.size(); ++i) {
      int64_t m = (i / plane) % cs.out_channels;
      // The combined multiplier is formed in float32, as the scales are float32 tensors, and applied
      // in float32 as ONNX Runtime does (linalg_internal.h).
      float ws = static_cast<float>(w_scale.get_double(w_scale.size() > 1 ? m : 0));
      const float multiplier = x_scale * ws / y_scale;
      double v = linalg::requantize_float32(acc[i], multiplier, y_zero);
      y.set_int(i, static_cast<int64_t>(std::clamp(v, lowest, highest)));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) {
    // Integer multiply-adds plus requantization (scale, round, zero point) per output element.
    return 2 * conv_macs(s.out[0], s.in[3]) + 3 * static_cast<double>(num_elements(s.out[0]));
  };
  return d;
}

}  // namespace

Window conv_transpose_window(const Node& node, const Shape& x, const Shape& w) {
  return conv_transpose_shape(node, x, w).window;
}

void register_conv_ops(OpRegistry& r) {
  r.add(conv_op());
  r.add(conv_transpose_op());
  r.add(conv_integer_op());
  r.add(qlinear_conv_op("QLinearConv", ""));
  r.add(qlinear_conv_op("QLinearConvDot4", "kiln"));
}

}  // namespace kiln::nn
