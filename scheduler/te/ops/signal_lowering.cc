// Signal processing lowerings: the cosine windows, MelWeightMatrix, DFT and STFT. Complex tensors are
// real tensors with a trailing axis of 2 (real, imaginary), 1 for a real signal. Transforms are direct
// O(n^2) sums per output bin (a reduction over the input points), as in frontend/ops/signal_ops.cc.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te {
namespace misc {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// ---- Windows ----------------------------------------------------------------------------------------

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1 (symmetric).
struct CosineWindow {
  double a0, a1, a2;
};

OpLowering window_lowering(const std::string& op_type, CosineWindow w) {
  return {op_type, "", [w](LowerContext& c) {
            DType out = c.out_dtype(0), ct = compute_dtype(out);
            int64_t size = c.out_shape(0)[0];
            bool periodic = c.node().attr_int("periodic", 1) != 0;
            int64_t period = periodic ? size : size - 1;
            c.set_output(0, compute(c.name(), "elementwise", out, c.out_shape(0), [&](const std::vector<Expr>& idx) {
              // A one-point symmetric window would divide by zero; like numpy it is [1].
              if (period <= 0) return const_of(out, 1);
              Expr angle = fimm(kTwoPi, ct) * to_float(idx[0], ct) / fimm(static_cast<double>(period), ct);
              Expr v = fimm(w.a0, ct) - fimm(w.a1, ct) * unary(ExprOp::Cos, angle);
              if (w.a2 != 0.0) v = v + fimm(w.a2, ct) * unary(ExprOp::Cos, fimm(2.0, ct) * angle);
              return cast(out, v);
            }));
          }};
}

// ---- MelWeightMatrix --------------------------------------------------------------------------------

// Filter i rises from DFT bin points[i] to points[i + 1] and falls to points[i + 2]; the points are
// num_mel_bins + 2 frequencies evenly spaced in mel between the edges. sample_rate and the edges may be
// runtime values, so the points are a stage. Index arithmetic is in float64, as the reference's.
void lower_mel_weight_matrix(LowerContext& c) {
  const DType f = DType::Float64;
  int64_t mel_bins = c.out_shape(0)[1];
  int64_t dft_length = constant_int(c, 1, "dft_length");
  Expr sample_rate = cast(f, scalar_of(c.input(2)));
  Expr lower_hz = cast(f, scalar_of(c.input(3)));
  Expr upper_hz = cast(f, scalar_of(c.input(4)));
  auto hz_to_mel = [&](const Expr& hz) {
    // log10(v) = log(v) / log(10).
    return fimm(2595.0, f) * unary(ExprOp::Log, fimm(1.0, f) + hz / fimm(700.0, f)) / fimm(std::log(10.0), f);
  };
  TensorRef points = compute(c.name("points"), "elementwise", DType::Int64, {mel_bins + 2},
                             [&](const std::vector<Expr>& idx) {
                               Expr low_mel = hz_to_mel(lower_hz);
                               Expr step = (hz_to_mel(upper_hz) - low_mel) / fimm(static_cast<double>(mel_bins + 2), f);
                               Expr mel = to_float(idx[0], f) * step + low_mel;
                               Expr hz = fimm(700.0, f) *
                                         (binary(ExprOp::Pow, fimm(10.0, f), mel / fimm(2595.0, f)) - fimm(1.0, f));
                               Expr bin = unary(ExprOp::Floor, fimm(static_cast<double>(dft_length + 1), f) * hz / sample_rate);
                               return cast(DType::Int64, bin);
                             });
  DType out = c.out_dtype(0);
  c.set_output(0, compute(c.name(), "elementwise", out, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    const Expr& j = idx[0];
    const Expr& i = idx[1];
    Expr low = at(points, {i}), center = at(points, {i + 1}), high = at(points, {i + 2});
    // The falling edge is written last in the reference, so it wins where both cover a bin.
    Expr falling = cast(f, high - j) / cast(f, high - center);
    Expr rising = cast(f, j - low) / cast(f, center - low);
    Expr v = select(center < high && j >= center && j < high, falling,
                    select(eq(center, low), select(eq(j, center), fimm(1.0, f), fimm(0.0, f)),
                           select(j >= low && j <= center, rising, fimm(0.0, f))));
    return cast(out, v);
  }));
}

// ---- DFT --------------------------------------------------------------------------------------------

// e^(sign * 2 pi i j / n) for an Int64 j in [0, n), as (cos, sin) in dtype t.
struct Twiddle {
  Expr re, im;
};

Twiddle twiddle(const Expr& j, int64_t n, double sign, DType t) {
  Expr angle = fimm(sign * kTwoPi, t) * to_float(j, t) / fimm(static_cast<double>(n), t);
  return {unary(ExprOp::Cos, angle), unary(ExprOp::Sin, angle)};
}

struct DftGeometry {
  int64_t axis, n, extent, channels, out_channels;
  bool inverse, onesided;
};

DftGeometry dft_geometry(const LowerContext& c) {
  DftGeometry g{};
  int64_t r = c.rank(0);
  int64_t axis = 1;
  if (c.opset() < 20) axis = c.node().attr_int("axis", 1);
  else axis = c.has_input(2) ? constant_int(c, 2, "axis") : -2;
  g.axis = axis < 0 ? axis + r : axis;
  g.inverse = c.node().attr_int("inverse", 0) != 0;
  g.onesided = c.node().attr_int("onesided", 0) != 0;
  g.extent = c.shape(0)[g.axis];
  g.channels = c.shape(0).back();
  g.out_channels = c.out_shape(0).back();
  bool irfft = g.inverse && g.onesided;
  if (c.has_input(1)) g.n = constant_int(c, 1, "dft_length");
  else g.n = irfft ? 2 * (g.extent - 1) : g.extent;
  return g;
}

// out[..., k, ..., ch] = scale * sum_m line[m] * e^(sign 2 pi i k m / n). Input beyond n is dropped,
// missing input is zero. An inverse one-sided transform rebuilds the Hermitian spectrum
// X[n - k] = conj(X[k]) from its first half and keeps the real part.
void lower_dft(LowerContext& c) {
  DftGeometry g = dft_geometry(c);
  const TensorRef& x = c.input(0);
  // Twiddles and sums in double: a transform's outputs near zero are cancellations of n unit-size terms,
  // and float32 leaves errors of n*eps there, beyond what ONNX's float64 references allow.
  DType out = c.out_dtype(0), ct = DType::Float64;
  double sign = g.inverse ? 1.0 : -1.0;
  Expr scale = fimm(g.inverse ? 1.0 / static_cast<double>(g.n) : 1.0, ct);
  bool irfft = g.out_channels == 1;
  int64_t points = irfft ? g.n : std::min(g.extent, g.n);
  auto point = [&](const std::vector<Expr>& idx, const Expr& m, int64_t ch) {
    std::vector<Expr> src = idx;
    src[g.axis] = m;
    src.back() = int_imm(ch);
    return cast(ct, at(x, src));
  };
  TensorRef sum = reduce(
      c.name("dft"), "reduction", ct, c.out_shape(0), Reducer::Sum, {points},
      [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
        const Expr& k = idx[g.axis];
        const Expr& m = r[0];
        Twiddle w = twiddle(floormod(k * m, int_imm(g.n)), g.n, sign, ct);
        if (irfft) {
          int64_t half = g.n / 2;
          Expr mirrored = m > int_imm(half);
          Expr src = clamp_index(select(mirrored, int_imm(g.n) - m, m), g.extent);
          Expr re = point(idx, src, 0);
          Expr im = g.channels == 2 ? select(mirrored, -point(idx, src, 1), point(idx, src, 1)) : fimm(0.0, ct);
          Expr valid = select(mirrored, int_imm(g.n) - m, m) < int_imm(g.extent);
          return select(valid, (re * w.re - im * w.im) * scale, fimm(0.0, ct));
        }
        Expr re = point(idx, m, 0);
        Expr im = g.channels == 2 ? point(idx, m, 1) : fimm(0.0, ct);
        Expr real = re * w.re - im * w.im, imag = re * w.im + im * w.re;
        return select(eq(idx.back(), int_imm(0)), real, imag) * scale;
      });
  c.set_output(0, cast_stage(c, sum, out));
}

// ---- STFT -------------------------------------------------------------------------------------------

// signal [batch, length, 1 or 2] -> [batch, frames, bins, 2]: frame f is samples f * step ..
// f * step + frame_length - 1, multiplied by the window and transformed.
void lower_stft(LowerContext& c) {
  const TensorRef& x = c.input(0);
  int64_t step = constant_int(c, 1, "frame_step");
  const TensorRef* window = c.has_input(2) ? &c.input(2) : nullptr;
  int64_t frame_length = c.has_input(3) ? constant_int(c, 3, "frame_length") : window ? (*window)->shape[0] : c.shape(0)[1];
  int64_t channels = c.shape(0)[2];
  DType out = c.out_dtype(0), ct = DType::Float64;  // as in DFT: cancellations need double
  TensorRef sum = reduce(
      c.name("stft"), "reduction", ct, c.out_shape(0), Reducer::Sum, {frame_length},
      [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
        const Expr& m = r[0];
        Expr t = idx[1] * step + m;
        Expr w = window ? cast(ct, at(*window, {m})) : fimm(1.0, ct);
        Expr re = w * cast(ct, at(x, {idx[0], t, int_imm(0)}));
        Expr im = channels == 2 ? w * cast(ct, at(x, {idx[0], t, int_imm(1)})) : fimm(0.0, ct);
        Twiddle tw = twiddle(floormod(idx[2] * m, int_imm(frame_length)), frame_length, -1.0, ct);
        return select(eq(idx[3], int_imm(0)), re * tw.re - im * tw.im, re * tw.im + im * tw.re);
      });
  c.set_output(0, cast_stage(c, sum, out));
}

}  // namespace

void register_signal_lowerings(LoweringRegistry& r) {
  r.add(window_lowering("HannWindow", {0.5, 0.5, 0.0}));
  r.add(window_lowering("HammingWindow", {25.0 / 46.0, 21.0 / 46.0, 0.0}));
  r.add(window_lowering("BlackmanWindow", {0.42, 0.5, 0.08}));
  r.add({"MelWeightMatrix", "", lower_mel_weight_matrix});
  r.add({"DFT", "", lower_dft});
  r.add({"STFT", "", lower_stft});
}

}  // namespace misc
}  // namespace kiln::te
