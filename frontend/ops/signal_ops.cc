// Signal processing: the window generators (HannWindow, HammingWindow, BlackmanWindow), MelWeightMatrix,
// DFT and STFT. Complex tensors are real tensors with a trailing axis of 2 (real, imaginary); a trailing
// axis of 1 holds a real signal. Transforms are evaluated directly (O(n^2) per line) in double precision
// from a precomputed twiddle table, which is exact enough for any length, not only powers of two.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <optional>

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln {
namespace {

using Complex = std::complex<double>;

[[noreturn]] void fail(const Node& node, const std::string& msg) { throw Error(node.label() + ": " + msg); }

void require_float_input(const InferContext& c, size_t i, const char* what) {
  if (!is_float(c.dtype(i)))
    c.unsupported(std::string("input '") + what + "' has dtype " + dtype_name(c.dtype(i)) + ", expected a float type");
}

// A scalar (or one-element) integer input whose value shapes the output, so it must be a constant.
int64_t constant_scalar_int(const InferContext& c, size_t i, const char* what) {
  if (!is_integer(c.dtype(i)))
    c.fail(std::string("input '") + what + "' must have an integer dtype, got " + dtype_name(c.dtype(i)));
  if (num_elements(c.shape(i)) != 1)
    c.fail(std::string("input '") + what + "' must hold one value, got shape " + shape_str(c.shape(i)));
  return c.require_constant(i, what).get_int(0);
}

// The dtype named by an output_datatype attribute; window and mel outputs are numeric.
DType output_datatype(const InferContext& c) {
  DType t = dtype_from_int(static_cast<int32_t>(c.node().attr_int("output_datatype", 1)));
  if (!is_supported(t) || t == DType::Bool) c.unsupported("output_datatype " + dtype_name(t) + " is not supported");
  return t;
}

// ---- Windows ----------------------------------------------------------------------------------------

// The generalized cosine window w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), where N is the size
// for a periodic window and size - 1 for a symmetric one.
struct CosineWindow {
  double a0, a1, a2;
};

std::vector<double> window_values(const CosineWindow& w, int64_t size, bool periodic) {
  double period = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> out(static_cast<size_t>(size));
  // A one-point symmetric window has N = 0 (the formula divides by zero); like numpy and scipy, it is [1].
  if (period <= 0) return std::vector<double>(static_cast<size_t>(size), 1.0);
  for (int64_t n = 0; n < size; ++n) {
    double angle = 2.0 * std::numbers::pi * static_cast<double>(n) / period;
    out[n] = w.a0 - w.a1 * std::cos(angle) + w.a2 * std::cos(2.0 * angle);
  }
  return out;
}

OpDef window_op(std::string name, CosineWindow coeffs) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "size");
    int64_t size = constant_scalar_int(c, 0, "size");
    if (size < 0) c.fail("size must not be negative, got " + std::to_string(size));
    c.set_output(0, output_datatype(c), {size});
  };
  d.eval = [coeffs](EvalContext& c) {
    int64_t size = c.input(0).get_int(0);
    bool periodic = c.node().attr_int("periodic", 1) != 0;
    DType t = dtype_from_int(static_cast<int32_t>(c.node().attr_int("output_datatype", 1)));
    std::vector<double> values = window_values(coeffs, size, periodic);
    c.set_output(0, Tensor::from_doubles(t, {size}, values));
  };
  // Two cosines and two multiply-adds per element.
  d.flops = [](const NodeShapes& s) { return 6.0 * static_cast<double>(num_elements(s.out[0])); };
  return d;
}

// ---- MelWeightMatrix --------------------------------------------------------------------------------

// Triangular filters on the mel scale (as the ONNX reference builds them): num_mel_bins + 2 points evenly
// spaced in mel between the edges, mapped to DFT bin indices; filter i rises from point i to point i+1
// and falls to point i+2. Output [dft_length / 2 + 1, num_mel_bins].
std::vector<double> mel_weights(const Node& node, int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate,
                                double lower_hz, double upper_hz) {
  if (sample_rate <= 0) fail(node, "sample_rate must be positive, got " + std::to_string(sample_rate));
  int64_t num_spectrogram_bins = dft_length / 2 + 1;
  auto hz_to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  double low_mel = hz_to_mel(lower_hz);
  double mel_step = (hz_to_mel(upper_hz) - low_mel) / static_cast<double>(num_mel_bins + 2);
  std::vector<int64_t> points(static_cast<size_t>(num_mel_bins + 2));
  for (int64_t i = 0; i < num_mel_bins + 2; ++i) {
    double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595.0) - 1.0);
    points[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  std::vector<double> out(static_cast<size_t>(num_spectrogram_bins * num_mel_bins), 0.0);
  auto at = [&](int64_t bin, int64_t mel) -> double& {
    if (bin < 0 || bin >= num_spectrogram_bins)
      fail(node, "the mel filters reach DFT bin " + std::to_string(bin) + ", outside [0, " +
                     std::to_string(num_spectrogram_bins) + "); check the edge frequencies against sample_rate");
    return out[bin * num_mel_bins + mel];
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    int64_t low = points[i], center = points[i + 1], high = points[i + 2];
    if (center == low) {
      at(center, i) = 1.0;
    } else {
      for (int64_t j = low; j <= center; ++j)
        at(j, i) = static_cast<double>(j - low) / static_cast<double>(center - low);
    }
    for (int64_t j = center; j < high; ++j) at(j, i) = static_cast<double>(high - j) / static_cast<double>(high - center);
  }
  return out;
}

OpDef mel_weight_matrix_op() {
  OpDef d;
  d.op_type = "MelWeightMatrix";
  d.infer = [](InferContext& c) {
    const char* names[] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
    for (size_t i = 0; i < 5; ++i) c.require_input(i, names[i]);
    int64_t mel_bins = constant_scalar_int(c, 0, "num_mel_bins");
    int64_t dft_length = constant_scalar_int(c, 1, "dft_length");
    if (mel_bins <= 0 || dft_length <= 0) c.fail("num_mel_bins and dft_length must be positive");
    if (!is_integer(c.dtype(2))) c.fail("sample_rate must have an integer dtype");
    require_float_input(c, 3, "lower_edge_hertz");
    require_float_input(c, 4, "upper_edge_hertz");
    c.set_output(0, output_datatype(c), {dft_length / 2 + 1, mel_bins});
  };
  d.eval = [](EvalContext& c) {
    int64_t mel_bins = c.input(0).get_int(0), dft_length = c.input(1).get_int(0);
    std::vector<double> w = mel_weights(c.node(), mel_bins, dft_length, c.input(2).get_int(0),
                                        c.input(3).get_double(0), c.input(4).get_double(0));
    DType t = dtype_from_int(static_cast<int32_t>(c.node().attr_int("output_datatype", 1)));
    c.set_output(0, Tensor::from_doubles(t, {dft_length / 2 + 1, mel_bins}, w));
  };
  return d;
}

// ---- DFT, STFT --------------------------------------------------------------------------------------

// e^(sign * 2 pi i j / n) for j in [0, n): every kernel entry of an n-point DFT is one of these.
std::vector<Complex> twiddles(int64_t n, double sign) {
  std::vector<Complex> t(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) t[j] = std::polar(1.0, sign * 2.0 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(n));
  return t;
}

// out[k] = sum_m line[m] * tw[(k * m) mod n] for k < out.size(); input beyond n is dropped, missing
// input is zero (the transform of the line truncated or zero-padded to n points).
void direct_dft(const std::vector<Complex>& line, const std::vector<Complex>& tw, std::vector<Complex>& out) {
  int64_t n = static_cast<int64_t>(tw.size());
  int64_t used = std::min<int64_t>(static_cast<int64_t>(line.size()), n);
  for (size_t k = 0; k < out.size(); ++k) {
    Complex acc = 0;
    int64_t step = static_cast<int64_t>(k) % n, j = 0;
    for (int64_t m = 0; m < used; ++m) {
      acc += line[m] * tw[j];
      j += step;
      if (j >= n) j -= n;
    }
    out[k] = acc;
  }
}

// How one DFT node maps its input to its output along the transformed axis.
struct DftGeometry {
  int64_t axis = 0;      // transformed axis (never the trailing complex axis)
  int64_t n = 0;         // transform length
  int64_t out_len = 0;   // output extent along the axis
  int64_t out_channels = 2;  // 1 for the real output of an inverse one-sided transform
  bool inverse = false;
  bool onesided = false;
};

DftGeometry dft_geometry(const Node& node, const Shape& in, int64_t axis, std::optional<int64_t> dft_length) {
  int64_t r = static_cast<int64_t>(in.size());
  if (r < 2) fail(node, "input must have rank >= 2 (signal axes and a trailing complex axis), got " + shape_str(in));
  if (in.back() != 1 && in.back() != 2)
    fail(node, "the last axis must be 1 (real) or 2 (complex), got " + std::to_string(in.back()));
  // Negative axes count from the back, trailing complex axis included; that axis itself is not allowed.
  if (axis < -r || axis > r - 2 || axis == -1)
    fail(node, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  DftGeometry g;
  g.axis = axis < 0 ? axis + r : axis;
  g.inverse = node.attr_int("inverse", 0) != 0;
  g.onesided = node.attr_int("onesided", 0) != 0;
  int64_t extent = in[g.axis];
  if (g.inverse && g.onesided) {
    // The input holds bins 0..n/2 of a Hermitian spectrum; the output is the real signal.
    g.n = dft_length ? *dft_length : 2 * (extent - 1);
    g.out_len = g.n;
    g.out_channels = 1;
  } else {
    g.n = dft_length ? *dft_length : extent;
    g.out_len = g.onesided ? g.n / 2 + 1 : g.n;
  }
  if (g.n <= 0) fail(node, "the DFT length must be positive, got " + std::to_string(g.n));
  return g;
}

Shape dft_output_shape(const Shape& in, const DftGeometry& g) {
  Shape out = in;
  out[g.axis] = g.out_len;
  out.back() = g.out_channels;
  return out;
}

// The node's axis: an attribute (default 1) before opset 20, then an optional scalar input (default -2).
template <typename AxisFn>
int64_t dft_axis(const Node& node, int64_t opset, AxisFn input_axis) {
  if (opset < 20) return node.attr_int("axis", 1);
  std::optional<int64_t> a = input_axis();
  return a ? *a : -2;
}

Tensor run_dft(const Tensor& x, const DftGeometry& g) {
  const Shape& in = x.shape();
  int64_t channels = in.back(), extent = in[g.axis];
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < g.axis; ++a) outer *= in[a];
  for (size_t a = g.axis + 1; a + 1 < in.size(); ++a) inner *= in[a];
  Tensor y(x.dtype(), dft_output_shape(in, g));
  std::vector<Complex> tw = twiddles(g.n, g.inverse ? 1.0 : -1.0);
  std::vector<Complex> line(static_cast<size_t>(extent)), spectrum, out(static_cast<size_t>(g.out_len));
  double scale = g.inverse ? 1.0 / static_cast<double>(g.n) : 1.0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t m = 0; m < extent; ++m) {
        int64_t base = ((o * extent + m) * inner + i) * channels;
        line[m] = Complex(x.get_double(base), channels == 2 ? x.get_double(base + 1) : 0.0);
      }
      if (g.out_channels == 1) {
        // Rebuild the full spectrum from its first half: X[n - k] = conj(X[k]).
        spectrum.assign(static_cast<size_t>(g.n), Complex(0));
        for (int64_t k = 0; k < g.n; ++k) {
          int64_t src = k <= g.n / 2 ? k : g.n - k;
          if (src < extent) spectrum[k] = k <= g.n / 2 ? line[src] : std::conj(line[src]);
        }
        direct_dft(spectrum, tw, out);
      } else {
        direct_dft(line, tw, out);
      }
      for (int64_t k = 0; k < g.out_len; ++k) {
        int64_t base = ((o * g.out_len + k) * inner + i) * g.out_channels;
        y.set_double(base, out[k].real() * scale);
        if (g.out_channels == 2) y.set_double(base + 1, out[k].imag() * scale);
      }
    }
  return y;
}

OpDef dft_op() {
  OpDef d;
  d.op_type = "DFT";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    require_float_input(c, 0, "input");
    std::optional<int64_t> dft_length;
    if (c.has_input(1)) dft_length = constant_scalar_int(c, 1, "dft_length");
    int64_t axis = dft_axis(c.node(), c.opset(), [&]() -> std::optional<int64_t> {
      if (!c.has_input(2)) return std::nullopt;
      return constant_scalar_int(c, 2, "axis");
    });
    c.set_output(0, c.dtype(0), dft_output_shape(c.shape(0), dft_geometry(c.node(), c.shape(0), axis, dft_length)));
  };
  d.eval = [](EvalContext& c) {
    std::optional<int64_t> dft_length;
    if (c.has_input(1)) dft_length = c.input(1).get_int(0);
    int64_t axis = dft_axis(c.node(), c.opset(), [&]() -> std::optional<int64_t> {
      if (!c.has_input(2)) return std::nullopt;
      return c.input(2).get_int(0);
    });
    const Tensor& x = c.input(0);
    c.set_output(0, run_dft(x, dft_geometry(c.node(), x.shape(), axis, dft_length)));
  };
  // A complex multiply-add (8 FLOPs) per (output value, input point) pair; real inputs count as complex.
  // The cost formula sees shapes only: an axis given as an input is taken to be the longest signal axis.
  d.flops = [](const NodeShapes& s) {
    if (s.out.empty() || s.in.empty() || s.in[0].size() < 2) return 0.0;
    const Shape& in = s.in[0];
    int64_t r = static_cast<int64_t>(in.size());
    int64_t points = 1;
    if (s.node.opset < 20 || s.node.inputs.size() < 3 || s.node.inputs[2].empty()) {
      int64_t axis = s.node.opset < 20 ? s.node.attr_int("axis", 1) : -2;
      if (axis < 0) axis += r;
      if (axis >= 0 && axis < r - 1) points = in[axis];
    } else {
      for (int64_t a = 0; a + 1 < r; ++a) points = std::max(points, in[a]);
    }
    double out_values = static_cast<double>(num_elements(s.out[0])) / static_cast<double>(s.out[0].back());
    return 8.0 * out_values * static_cast<double>(points);
  };
  return d;
}

// STFT: frames of frame_length samples every frame_step samples, each multiplied by the window and
// transformed. signal [batch, length, 1 or 2] -> [batch, frames, bins, 2].
struct StftGeometry {
  int64_t batch, length, channels, step, frame_length, frames, bins;
};

StftGeometry stft_geometry(const Node& node, const Shape& signal, int64_t step, const Shape* window,
                           std::optional<int64_t> frame_length) {
  if (signal.size() != 3 || (signal[2] != 1 && signal[2] != 2))
    fail(node, "signal must be [batch, length, 1 or 2], got " + shape_str(signal));
  if (step <= 0) fail(node, "frame_step must be positive, got " + std::to_string(step));
  StftGeometry g{signal[0], signal[1], signal[2], step, 0, 0, 0};
  if (window && window->size() != 1) fail(node, "window must be 1-D, got " + shape_str(*window));
  if (frame_length) {
    g.frame_length = *frame_length;
    if (window && (*window)[0] != g.frame_length)
      fail(node, "window length " + std::to_string((*window)[0]) + " differs from frame_length " +
                     std::to_string(g.frame_length));
  } else {
    g.frame_length = window ? (*window)[0] : g.length;
  }
  if (g.frame_length <= 0 || g.frame_length > g.length)
    fail(node, "frame length " + std::to_string(g.frame_length) + " must be in [1, signal length " +
                   std::to_string(g.length) + "]");
  g.frames = 1 + (g.length - g.frame_length) / g.step;
  g.bins = node.attr_int("onesided", 1) != 0 ? g.frame_length / 2 + 1 : g.frame_length;
  return g;
}

OpDef stft_op() {
  OpDef d;
  d.op_type = "STFT";
  d.infer = [](InferContext& c) {
    c.require_input(0, "signal");
    c.require_input(1, "frame_step");
    require_float_input(c, 0, "signal");
    int64_t step = constant_scalar_int(c, 1, "frame_step");
    if (c.has_input(2) && c.dtype(2) != c.dtype(0)) c.fail("window must have the signal's dtype");
    std::optional<int64_t> frame_length;
    if (c.has_input(3)) frame_length = constant_scalar_int(c, 3, "frame_length");
    StftGeometry g = stft_geometry(c.node(), c.shape(0), step, c.has_input(2) ? &c.shape(2) : nullptr, frame_length);
    c.set_output(0, c.dtype(0), {g.batch, g.frames, g.bins, 2});
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor* window = c.has_input(2) ? &c.input(2) : nullptr;
    std::optional<int64_t> frame_length;
    if (c.has_input(3)) frame_length = c.input(3).get_int(0);
    StftGeometry g = stft_geometry(c.node(), x.shape(), c.input(1).get_int(0), window ? &window->shape() : nullptr,
                                   frame_length);
    Tensor y(x.dtype(), {g.batch, g.frames, g.bins, 2});
    std::vector<Complex> tw = twiddles(g.frame_length, -1.0);
    std::vector<Complex> frame(static_cast<size_t>(g.frame_length)), out(static_cast<size_t>(g.bins));
    for (int64_t b = 0; b < g.batch; ++b)
      for (int64_t f = 0; f < g.frames; ++f) {
        for (int64_t m = 0; m < g.frame_length; ++m) {
          int64_t base = (b * g.length + f * g.step + m) * g.channels;
          double w = window ? window->get_double(m) : 1.0;
          frame[m] = w * Complex(x.get_double(base), g.channels == 2 ? x.get_double(base + 1) : 0.0);
        }
        direct_dft(frame, tw, out);
        for (int64_t k = 0; k < g.bins; ++k) {
          int64_t base = ((b * g.frames + f) * g.bins + k) * 2;
          y.set_double(base, out[k].real());
          y.set_double(base + 1, out[k].imag());
        }
      }
    c.set_output(0, std::move(y));
  };
  // Per frame: the window product (1 per sample) and a complex multiply-add (8) per (bin, sample).
  d.flops = [](const NodeShapes& s) {
    if (s.out.empty() || s.out[0].size() != 4) return 0.0;
    const Shape& o = s.out[0];
    double frames = static_cast<double>(o[0] * o[1]);
    // The frame length is not in the output shape when onesided; 2 * (bins - 1) is within one of it.
    double frame_length = std::max<double>(1.0, 2.0 * static_cast<double>(o[2] - 1));
    return frames * (frame_length + 8.0 * static_cast<double>(o[2]) * frame_length);
  };
  return d;
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  r.add(window_op("HannWindow", {0.5, 0.5, 0.0}));
  r.add(window_op("HammingWindow", {25.0 / 46.0, 21.0 / 46.0, 0.0}));
  r.add(window_op("BlackmanWindow", {0.42, 0.5, 0.08}));
  r.add(mel_weight_matrix_op());
  r.add(dft_op());
  r.add(stft_op());
}

}  // namespace kiln
