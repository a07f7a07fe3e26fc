// Lowerings of the ops that sample or scatter images at computed positions: GridSample, AffineGrid,
// RoiAlign, DeformConv and Col2Im. Coordinates and interpolation mirror frontend/ops/sampling_ops.cc.
// Positions computed from data are clamped into their tensors and guarded by selects.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "frontend/ops/axes_and_broadcast.h"
#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te {
namespace misc {
namespace {

std::vector<int64_t> spatial_attr(const LowerContext& c, const char* name, size_t rank, int64_t dflt) {
  return c.node().attr_ints(name, std::vector<int64_t>(rank, dflt));
}

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t a = shape.size(); a-- > 1;) s[a - 1] = s[a] * shape[a];
  return s;
}

// ---- GridSample -------------------------------------------------------------------------------------

enum class SampleMode { Nearest, Linear, Cubic };
enum class PaddingMode { Zeros, Border, Reflection };

struct GridSampleParams {
  SampleMode mode = SampleMode::Linear;
  PaddingMode padding = PaddingMode::Zeros;
  bool align_corners = false;
};

// Opset 16 names the modes bilinear/bicubic, opset 20 linear/cubic; both spellings are accepted.
GridSampleParams grid_sample_params(const LowerContext& c) {
  GridSampleParams p;
  std::string mode = c.node().attr_string("mode", c.opset() < 20 ? "bilinear" : "linear");
  if (mode == "nearest") p.mode = SampleMode::Nearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = SampleMode::Linear;
  else if (mode == "cubic" || mode == "bicubic") p.mode = SampleMode::Cubic;
  else c.fail("unknown mode '" + mode + "'");
  std::string padding = c.node().attr_string("padding_mode", "zeros");
  if (padding == "zeros") p.padding = PaddingMode::Zeros;
  else if (padding == "border") p.padding = PaddingMode::Border;
  else if (padding == "reflection") p.padding = PaddingMode::Reflection;
  else c.fail("unknown padding_mode '" + padding + "'");
  p.align_corners = c.node().attr_int("align_corners", 0) != 0;
  return p;
}

// Folds x back into [lo, hi] by reflecting at the borders as often as needed.
Expr reflect(const Expr& x, double lo, double hi) {
  DType t = x->dtype;
  double range = hi - lo;
  if (range <= 0) return fimm(lo, t);
  Expr l = fimm(lo, t), h = fimm(hi, t);
  Expr below = x < l;
  Expr dist = select(below, l - x, x - h);
  Expr folds = unary(ExprOp::Floor, dist / fimm(range, t));
  Expr rest = dist - folds * fimm(range, t);
  Expr even = eq(binary(ExprOp::FMod, folds, fimm(2.0, t)), fimm(0.0, t));
  Expr from_low = select(even, l + rest, h - rest), from_high = select(even, h - rest, l + rest);
  return select(x >= l && x <= h, x, select(below, from_low, from_high));
}

// Keys' cubic convolution weight (A = -0.75) of tap k in 0..3 (floor(x) - 1 + k), t = x - floor(x).
Expr cubic_weight(const Expr& k, const Expr& t) {
  DType dt = t->dtype;
  auto f = [dt](double v) { return fimm(v, dt); };
  constexpr double a = -0.75;
  auto near = [&](const Expr& d) { return ((f(a + 2) * d - f(a + 3)) * d * d) + f(1); };
  auto far = [&](const Expr& d) { return ((f(a) * d - f(5 * a)) * d + f(8 * a)) * d - f(4 * a); };
  return select(eq(k, int_imm(0)), far(t + f(1)),
                select(eq(k, int_imm(1)), near(t), select(eq(k, int_imm(2)), near(f(1) - t), far(f(2) - t))));
}

// One axis of one tap: the (clamped) input index, whether it reads the input (else zero), its weight.
struct AxisTap {
  Expr index, valid, weight;
};

class AxisSampler {
 public:
  AxisSampler(const GridSampleParams& p, int64_t extent, DType t) : p_(p), extent_(extent), t_(t) {
    lo_ = p.align_corners ? 0.0 : -0.5;
    hi_ = p.align_corners ? static_cast<double>(extent - 1) : static_cast<double>(extent) - 0.5;
  }

  // Tap `k` (an Int64 reduction index) for normalized coordinate g (values outside [-1, 1] pad).
  AxisTap tap(const Expr& g, const Expr& k) const {
    double n = static_cast<double>(extent_);
    Expr one = fimm(1.0, t_);
    Expr x = p_.align_corners ? (g + one) / fimm(2.0, t_) * fimm(n - 1, t_)
                              : ((g + one) * fimm(n, t_) - one) / fimm(2.0, t_);
    // Nearest rounds halves to even on every rank (as the ONNX test data does).
    if (p_.mode == SampleMode::Nearest) x = unary(ExprOp::Round, x);
    Expr outside = x < fimm(lo_, t_) || x > fimm(hi_, t_);
    if (p_.padding == PaddingMode::Border) x = select(outside, max(min(x, fimm(n - 1, t_)), fimm(0.0, t_)), x);
    else if (p_.padding == PaddingMode::Reflection) x = reflect(x, lo_, hi_);
    if (p_.mode == SampleMode::Nearest) return pixel(cast(DType::Int64, x), one);
    Expr x0 = unary(ExprOp::Floor, x);
    Expr i0 = cast(DType::Int64, x0);
    Expr frac = x - x0;
    if (p_.mode == SampleMode::Linear) return pixel(i0 + k, select(eq(k, int_imm(0)), one - frac, frac));
    return pixel(i0 - 1 + k, cubic_weight(k, frac));
  }

 private:
  // Where input index i reads from under the padding mode.
  AxisTap pixel(const Expr& i, const Expr& weight) const {
    switch (p_.padding) {
      case PaddingMode::Zeros: return {clamp_index(i, extent_), in_range(i, 0, extent_), weight};
      case PaddingMode::Border: return {clamp_index(i, extent_), nullptr, weight};
      case PaddingMode::Reflection: {
        // Truncation toward zero, as the reference's int() does.
        Expr r = cast(DType::Int64, reflect(cast(t_, i), lo_, hi_));
        return {select(in_range(i, 0, extent_), i, clamp_index(r, extent_)), nullptr, weight};
      }
    }
    return {};
  }

  GridSampleParams p_;
  int64_t extent_;
  DType t_;
  double lo_ = 0, hi_ = 0;
};

// Y[n, c, o...] = sum over the taps (1, 2 or 4 per axis) of the tap weights' product times X at the tap;
// the taps are the reduction axes.
void lower_grid_sample(LowerContext& c) {
  GridSampleParams p = grid_sample_params(c);
  const TensorRef& x = c.input(0);
  const TensorRef& grid = c.input(1);
  size_t r = x->shape.size() - 2;
  DType out = c.out_dtype(0), ct = compute_dtype(out);
  std::vector<AxisSampler> samplers;
  for (size_t a = 0; a < r; ++a) samplers.emplace_back(p, x->shape[2 + a], ct);
  int64_t taps = p.mode == SampleMode::Nearest ? 1 : p.mode == SampleMode::Linear ? 2 : 4;
  TensorRef sum = reduce(
      c.name("sample"), "reduction", ct, c.out_shape(0), Reducer::Sum, std::vector<int64_t>(r, taps),
      [&](const std::vector<Expr>& idx, const std::vector<Expr>& k) {
        std::vector<Expr> src = {idx[0], idx[1]};
        Expr weight, valid;
        for (size_t a = 0; a < r; ++a) {
          // The grid's last axis lists coordinates innermost axis first (x, y, z).
          std::vector<Expr> gi = {idx[0]};
          gi.insert(gi.end(), idx.begin() + 2, idx.end());
          gi.push_back(int_imm(static_cast<int64_t>(r - 1 - a)));
          AxisTap t = samplers[a].tap(cast(ct, at(grid, gi)), k[a]);
          src.push_back(t.index);
          weight = weight ? weight * t.weight : t.weight;
          if (t.valid) valid = valid ? valid && t.valid : t.valid;
        }
        Expr value = cast(ct, at(x, src));
        if (valid) value = select(valid, value, fimm(0.0, ct));
        return weight * value;
      });
  c.set_output(0, cast_stage(c, sum, out));
}

// ---- AffineGrid -------------------------------------------------------------------------------------

// grid[n, d..., row] = sum_k theta[n, row, k] * base[k] + theta[n, row, r], base = the normalized
// position (x, y[, z]) of d..., x along the last axis.
void lower_affine_grid(LowerContext& c) {
  const TensorRef& theta = c.input(0);
  const Shape& out_shape = c.out_shape(0);
  int64_t r = out_shape.back();
  bool align = c.node().attr_int("align_corners", 0) != 0;
  DType out = c.out_dtype(0), ct = compute_dtype(out);
  // Pixel corners (align_corners) or pixel centres span [-1, 1].
  auto coord = [&](const Expr& i, int64_t n) {
    Expr fi = to_float(i, ct);
    if (align) {
      if (n == 1) return fimm(-1.0, ct);
      return fimm(-1.0, ct) + fimm(2.0, ct) * fi / fimm(static_cast<double>(n - 1), ct);
    }
    return fimm(-1.0, ct) + (fimm(2.0, ct) * fi + fimm(1.0, ct)) / fimm(static_cast<double>(n), ct);
  };
  c.set_output(0, compute(c.name(), "injective", out, out_shape, [&](const std::vector<Expr>& idx) {
    const Expr& n = idx[0];
    const Expr& row = idx[static_cast<size_t>(r + 1)];
    Expr acc;
    for (int64_t k = 0; k <= r; ++k) {
      Expr th = cast(ct, at(theta, {n, row, int_imm(k)}));
      Expr term = k < r ? th * coord(idx[static_cast<size_t>(r - k)], out_shape[static_cast<size_t>(r - k)]) : th;
      acc = acc ? acc + term : term;
    }
    return cast(out, acc);
  }));
}

// ---- RoiAlign ---------------------------------------------------------------------------------------

struct RoiAlignParams {
  bool max_mode = false, half_pixel = true;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
};

RoiAlignParams roi_align_params(const LowerContext& c) {
  RoiAlignParams p;
  p.max_mode = c.node().attr_string("mode", "avg") == "max";
  // Opset 16 added the attribute, defaulting to half_pixel; opset 10 behaves as output_half_pixel.
  p.half_pixel = c.node().attr_string("coordinate_transformation_mode",
                                      c.opset() >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  p.out_h = c.node().attr_int("output_height", 1);
  p.out_w = c.node().attr_int("output_width", 1);
  p.sampling_ratio = c.node().attr_int("sampling_ratio", 0);
  p.spatial_scale = c.node().attr_float("spatial_scale", 1.0);
  return p;
}

// The ROI geometry of one roi, as expressions in dtype t (mirrors the reference's double arithmetic).
struct RoiBox {
  Expr start_h, start_w, bin_h, bin_w, grid_h, grid_w;  // grid_*: samples per bin (Int64)
};

RoiBox roi_box(const RoiAlignParams& p, const TensorRef& rois, const Expr& roi, DType t) {
  Expr scale = fimm(p.spatial_scale, t), shift = fimm(p.half_pixel ? 0.5 : 0.0, t);
  auto coord = [&](int64_t k) { return cast(t, at(rois, {roi, int_imm(k)})) * scale - shift; };
  RoiBox b;
  b.start_w = coord(0);
  b.start_h = coord(1);
  Expr roi_w = coord(2) - b.start_w, roi_h = coord(3) - b.start_h;
  if (!p.half_pixel) {  // malformed ROIs become 1x1
    roi_w = max(roi_w, fimm(1.0, t));
    roi_h = max(roi_h, fimm(1.0, t));
  }
  b.bin_h = roi_h / fimm(static_cast<double>(p.out_h), t);
  b.bin_w = roi_w / fimm(static_cast<double>(p.out_w), t);
  auto grid = [&](const Expr& bin) {
    if (p.sampling_ratio > 0) return int_imm(p.sampling_ratio);
    return cast(DType::Int64, unary(ExprOp::Ceil, bin));
  };
  b.grid_h = grid(b.bin_h);
  b.grid_w = grid(b.bin_w);
  return b;
}

// The largest adaptive sample grid over constant ROIs (the reduction extent when sampling_ratio is 0).
std::pair<int64_t, int64_t> adaptive_grid_bound(const RoiAlignParams& p, const Tensor& rois) {
  int64_t gh = 1, gw = 1;
  double shift = p.half_pixel ? 0.5 : 0.0;
  for (int64_t roi = 0; roi < rois.shape()[0]; ++roi) {
    double v[4];
    for (int k = 0; k < 4; ++k) v[k] = rois.get_double(roi * 4 + k) * p.spatial_scale - shift;
    double roi_w = v[2] - v[0], roi_h = v[3] - v[1];
    if (!p.half_pixel) roi_w = std::max(roi_w, 1.0), roi_h = std::max(roi_h, 1.0);
    gh = std::max(gh, static_cast<int64_t>(std::ceil(roi_h / static_cast<double>(p.out_h))));
    gw = std::max(gw, static_cast<int64_t>(std::ceil(roi_w / static_cast<double>(p.out_w))));
  }
  return {gh, gw};
}

// One bilinear sample at (y, x) of channel plane X[b, ch], torchvision style: outside [-1, H] x [-1, W]
// it is zero; the four corners are combined by sum (avg) or max of the weighted corners (max mode).
Expr roi_sample(const TensorRef& x, const Expr& b, const Expr& ch, Expr y, Expr xx, bool max_mode, DType t) {
  int64_t height = x->shape[2], width = x->shape[3];
  Expr zero = fimm(0.0, t), one = fimm(1.0, t);
  Expr inside = y >= fimm(-1.0, t) && y <= fimm(static_cast<double>(height), t) && xx >= fimm(-1.0, t) &&
                xx <= fimm(static_cast<double>(width), t);
  y = max(y, zero);
  xx = max(xx, zero);
  auto axis = [&](const Expr& v, int64_t extent, Expr& lo, Expr& hi, Expr& frac) {
    Expr i = cast(DType::Int64, v);
    Expr at_end = i >= int_imm(extent - 1);
    lo = clamp_index(i, extent);
    hi = clamp_index(i + 1, extent);
    frac = select(at_end, zero, v - cast(t, lo));
  };
  Expr y_lo, y_hi, ly, x_lo, x_hi, lx;
  axis(y, height, y_lo, y_hi, ly);
  axis(xx, width, x_lo, x_hi, lx);
  Expr hy = one - ly, hx = one - lx;
  auto px = [&](const Expr& yi, const Expr& xi) { return cast(t, at(x, {b, ch, yi, xi})); };
  Expr v00 = hy * hx * px(y_lo, x_lo), v01 = hy * lx * px(y_lo, x_hi);
  Expr v10 = ly * hx * px(y_hi, x_lo), v11 = ly * lx * px(y_hi, x_hi);
  Expr v = max_mode ? max(max(max(v00, v01), v10), v11) : v00 + v01 + v10 + v11;
  return select(inside, v, zero);
}

// Y[roi, c, ph, pw] = average (or max) over a grid of bilinear samples in the bin. With sampling_ratio 0
// the grid size is ceil(bin size), which depends on the ROI values: the reduction then runs over the
// largest grid of the (constant) ROIs and masks the samples beyond each ROI's own grid.
void lower_roi_align(LowerContext& c) {
  RoiAlignParams p = roi_align_params(c);
  const TensorRef& x = c.input(0);
  const TensorRef& rois = c.input(1);
  const TensorRef& batch_indices = c.input(2);
  DType out = c.out_dtype(0), ct = compute_dtype(out);
  int64_t ext_h = p.sampling_ratio, ext_w = p.sampling_ratio;
  if (p.sampling_ratio == 0) {
    const Tensor* constant_rois = c.constant(1);
    if (!constant_rois) {
      // The sample count per bin depends on runtime ROI values: no static loop bound exists.
      c.set_output(0, extern_stage(c.name(), c.node(), {x, rois, batch_indices}, 0, out, c.out_shape(0)));
      return;
    }
    std::tie(ext_h, ext_w) = adaptive_grid_bound(p, *constant_rois);
  }
  Reducer reducer = p.max_mode ? Reducer::Max : Reducer::Sum;
  TensorRef acc = reduce(
      c.name("samples"), "pool", ct, c.out_shape(0), reducer, {ext_h, ext_w},
      [&](const std::vector<Expr>& idx, const std::vector<Expr>& k) {
        RoiBox box = roi_box(p, rois, idx[0], ct);
        Expr b = clamp_index(cast(DType::Int64, at(batch_indices, {idx[0]})), x->shape[0]);
        auto position = [&](const Expr& start, const Expr& bin, const Expr& cell, const Expr& i, const Expr& grid) {
          return start + to_float(cell, ct) * bin + (to_float(i, ct) + fimm(0.5, ct)) * bin / to_float(grid, ct);
        };
        Expr y = position(box.start_h, box.bin_h, idx[2], k[0], box.grid_h);
        Expr xx = position(box.start_w, box.bin_w, idx[3], k[1], box.grid_w);
        Expr v = roi_sample(x, b, idx[1], y, xx, p.max_mode, ct);
        if (p.sampling_ratio > 0) return v;
        return select(k[0] < box.grid_h && k[1] < box.grid_w, v, reducer_identity(reducer, ct));
      });
  c.set_output(0, compute(c.name(), "elementwise", out, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    RoiBox box = roi_box(p, rois, idx[0], ct);
    Expr per_bin = box.grid_h * box.grid_w;
    Expr v = at(acc, idx);
    // An empty grid (a degenerate ROI) gives 0, as the reference's untouched accumulator.
    Expr empty = per_bin <= int_imm(0);
    if (!p.max_mode) v = v / to_float(max(per_bin, int_imm(1)), ct);
    return cast(out, p.sampling_ratio > 0 ? v : select(empty, fimm(0.0, ct), v));
  }));
}

// ---- DeformConv -------------------------------------------------------------------------------------

// Bilinear read of plane X[n, ch] at (y, x); corners outside the plane count as zero.
Expr bilinear_zero_padded(const TensorRef& x, const Expr& n, const Expr& ch, const Expr& y, const Expr& xx, DType t) {
  int64_t height = x->shape[2], width = x->shape[3];
  Expr y0 = unary(ExprOp::Floor, y), x0 = unary(ExprOp::Floor, xx);
  Expr ty = y - y0, tx = xx - x0;
  Expr iy = cast(DType::Int64, y0), ix = cast(DType::Int64, x0);
  Expr one = fimm(1.0, t), acc;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      Expr py = iy + dy, pxi = ix + dx;
      Expr w = (dy ? ty : one - ty) * (dx ? tx : one - tx);
      Expr v = cast(t, at(x, {n, ch, clamp_index(py, height), clamp_index(pxi, width)}));
      Expr term = select(in_range(py, 0, height) && in_range(pxi, 0, width), w * v, fimm(0.0, t));
      acc = acc ? acc + term : term;
    }
  return acc;
}

// Two stages: the displaced (and masked) input each tap sees, [N, C, kH, kW, oH, oW], then a grouped
// convolution of those columns with W (plus the bias).
void lower_deform_conv(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const TensorRef& w = c.input(1);
  const TensorRef& offset = c.input(2);
  const TensorRef* bias = c.has_input(3) ? &c.input(3) : nullptr;
  const TensorRef* mask = c.has_input(4) ? &c.input(4) : nullptr;
  if (x->shape.size() != 4) c.unsupported("only 2-D DeformConv (4-D X) is supported");
  DType out = c.out_dtype(0), ct = compute_dtype(out);
  int64_t batch = x->shape[0], channels = x->shape[1], out_channels = w->shape[0];
  int64_t kh = w->shape[2], kw = w->shape[3], taps = kh * kw;
  int64_t group = c.node().attr_int("group", 1), offset_group = c.node().attr_int("offset_group", 1);
  std::vector<int64_t> strides = spatial_attr(c, "strides", 2, 1), dilations = spatial_attr(c, "dilations", 2, 1);
  std::vector<int64_t> pads = spatial_attr(c, "pads", 4, 0);
  int64_t out_h = c.out_shape(0)[2], out_w = c.out_shape(0)[3];
  int64_t channels_per_offset_group = channels / offset_group;
  int64_t cin_per_group = channels / group, cout_per_group = out_channels / group;
  TensorRef columns = compute(
      c.name("columns"), "injective", ct, {batch, channels, kh, kw, out_h, out_w}, [&](const std::vector<Expr>& idx) {
        const Expr &n = idx[0], &ch = idx[1], &ki = idx[2], &kj = idx[3], &oh = idx[4], &ow = idx[5];
        Expr og = floordiv(ch, int_imm(channels_per_offset_group));
        Expr tap = og * taps + ki * kw + kj;
        Expr dy = cast(ct, at(offset, {n, tap * 2, oh, ow}));
        Expr dx = cast(ct, at(offset, {n, tap * 2 + 1, oh, ow}));
        Expr sy = to_float(oh * strides[0] - pads[0] + ki * dilations[0], ct) + dy;
        Expr sx = to_float(ow * strides[1] - pads[1] + kj * dilations[1], ct) + dx;
        Expr v = bilinear_zero_padded(x, n, ch, sy, sx, ct);
        if (mask) v = v * cast(ct, at(*mask, {n, tap, oh, ow}));
        return v;
      });
  TensorRef conv = reduce(
      c.name("conv"), "conv", ct, c.out_shape(0), Reducer::Sum, {cin_per_group, kh, kw},
      [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
        const Expr& m = idx[1];
        Expr ch = floordiv(m, int_imm(cout_per_group)) * cin_per_group + r[0];
        return cast(ct, at(w, {m, r[0], r[1], r[2]})) * at(columns, {idx[0], ch, r[1], r[2], idx[2], idx[3]});
      });
  if (!bias) {
    c.set_output(0, cast_stage(c, conv, out));
    return;
  }
  c.set_output(0, compute(c.name(), "broadcast", out, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    return cast(out, at(conv, idx) + cast(ct, at(*bias, {idx[1]})));
  }));
}

// ---- Col2Im -----------------------------------------------------------------------------------------

// image[n, c, p...] = sum over block elements k of input[n, c * prod(block) + k, l], where block position
// l satisfies p = l * stride - pad + k * dilation on every axis (no l: padding, no contribution).
void lower_col2im(LowerContext& c) {
  const TensorRef& in = c.input(0);
  std::vector<int64_t> image = tensor_ints(c.require_constant(1, "image_shape"));
  std::vector<int64_t> block = tensor_ints(c.require_constant(2, "block_shape"));
  size_t r = image.size();
  std::vector<int64_t> strides = spatial_attr(c, "strides", r, 1), dilations = spatial_attr(c, "dilations", r, 1);
  std::vector<int64_t> pads = spatial_attr(c, "pads", 2 * r, 0);
  std::vector<int64_t> blocks;
  int64_t block_size = 1;
  for (size_t a = 0; a < r; ++a) {
    block_size *= block[a];
    int64_t span = (block[a] - 1) * dilations[a] + 1;
    blocks.push_back((image[a] + pads[a] + pads[a + r] - span) / strides[a] + 1);
  }
  std::vector<int64_t> block_strides = strides_of(block), position_strides = strides_of(blocks);
  DType out = c.out_dtype(0), acc_t = is_float(out) ? compute_dtype(out) : out;
  TensorRef sum = reduce(
      c.name("fold"), "reduction", acc_t, c.out_shape(0), Reducer::Sum, block,
      [&](const std::vector<Expr>& idx, const std::vector<Expr>& k) {
        Expr valid, kflat = int_imm(0), lflat = int_imm(0);
        for (size_t a = 0; a < r; ++a) {
          Expr q = idx[2 + a] + pads[a] - k[a] * dilations[a];
          Expr l = floordiv(q, int_imm(strides[a]));
          Expr ok = q >= int_imm(0) && eq(floormod(q, int_imm(strides[a])), int_imm(0)) && l < int_imm(blocks[a]);
          valid = valid ? valid && ok : ok;
          kflat = kflat + k[a] * block_strides[a];
          lflat = lflat + l * position_strides[a];
        }
        Expr row = idx[1] * block_size + kflat;
        Expr v = cast(acc_t, at(in, {idx[0], row, clamp_index(lflat, in->shape[2])}));
        return select(valid, v, const_of(acc_t, 0));
      });
  c.set_output(0, cast_stage(c, sum, out));
}

}  // namespace

void register_sampling_lowerings(LoweringRegistry& r) {
  r.add({"GridSample", "", lower_grid_sample});
  r.add({"AffineGrid", "", lower_affine_grid});
  r.add({"RoiAlign", "", lower_roi_align});
  r.add({"DeformConv", "", lower_deform_conv});
  r.add({"Col2Im", "", lower_col2im});
}

}  // namespace misc
}  // namespace kiln::te
