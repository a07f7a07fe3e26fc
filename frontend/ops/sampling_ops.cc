// Ops that sample or scatter images at computed positions: GridSample, AffineGrid, RoiAlign, DeformConv
// and Col2Im. Coordinates and interpolation follow the ONNX reference implementation (which follows
// PyTorch's grid_sample and torchvision's roi_align).
#include <algorithm>
#include <array>
#include <cmath>

#include "frontend/ops/misc_family.h"

namespace kiln {
namespace misc {
namespace {

// An odometer over a box of extents: advances idx in row-major order, false after the last index.
bool next_index(std::vector<int64_t>& idx, const Shape& extents) {
  for (size_t a = idx.size(); a-- > 0;) {
    if (++idx[a] < extents[a]) return true;
    idx[a] = 0;
  }
  return false;
}

// A per-axis int attribute of the spatial rank, `dflt` everywhere when absent.
std::vector<int64_t> spatial_ints(const Node& node, const char* name, size_t rank, int64_t dflt, int64_t min_value) {
  std::vector<int64_t> v = node.attr_ints(name, std::vector<int64_t>(rank, dflt));
  if (v.size() != rank)
    fail(node, std::string(name) + " must have " + std::to_string(rank) + " values, got " + std::to_string(v.size()));
  for (int64_t x : v)
    if (x < min_value) fail(node, std::string(name) + " values must be >= " + std::to_string(min_value));
  return v;
}

// ---- GridSample -------------------------------------------------------------------------------------

enum class SampleMode { Nearest, Linear, Cubic };
enum class PaddingMode { Zeros, Border, Reflection };

struct GridSampleParams {
  SampleMode mode;
  PaddingMode padding;
  bool align_corners;
};

// Opset 16 names the modes bilinear/bicubic, opset 20 linear/cubic; both spellings are accepted.
GridSampleParams grid_sample_params(const Node& node, int64_t opset) {
  GridSampleParams p{};
  std::string mode = node.attr_string("mode", opset < 20 ? "bilinear" : "linear");
  if (mode == "nearest") p.mode = SampleMode::Nearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = SampleMode::Linear;
  else if (mode == "cubic" || mode == "bicubic") p.mode = SampleMode::Cubic;
  else fail(node, "unknown mode '" + mode + "'");
  std::string padding = node.attr_string("padding_mode", "zeros");
  if (padding == "zeros") p.padding = PaddingMode::Zeros;
  else if (padding == "border") p.padding = PaddingMode::Border;
  else if (padding == "reflection") p.padding = PaddingMode::Reflection;
  else fail(node, "unknown padding_mode '" + padding + "'");
  p.align_corners = node.attr_int("align_corners", 0) != 0;
  return p;
}

// Folds x back into [lo, hi] by reflecting at the borders as often as needed.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  double dist = x < lo ? lo - x : x - hi;
  double folds = std::floor(dist / range);
  double rest = dist - folds * range;
  bool even = std::fmod(folds, 2.0) == 0.0;
  if (x < lo) return even ? lo + rest : hi - rest;
  return even ? hi - rest : lo + rest;
}

// Keys' cubic convolution weights (A = -0.75) for the four taps floor(x)-1 .. floor(x)+2, t = x - floor(x).
std::array<double, 4> cubic_weights(double t) {
  constexpr double a = -0.75;
  auto near = [](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };            // |d| <= 1
  auto far = [](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };        // 1 < |d| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// The taps of one axis for one sample: input index (-1 = zero padding) and weight.
struct Tap {
  int64_t index;
  double weight;
};

class AxisSampler {
 public:
  AxisSampler(const GridSampleParams& p, int64_t extent) : p_(p), extent_(extent) {
    lo_ = p.align_corners ? 0.0 : -0.5;
    hi_ = p.align_corners ? static_cast<double>(extent - 1) : static_cast<double>(extent) - 0.5;
  }

  // Appends the taps for normalized coordinate g in [-1, 1] (values outside are padding).
  void taps(double g, std::vector<Tap>& out) const {
    double n = static_cast<double>(extent_);
    double x = p_.align_corners ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
    // Nearest rounds halves to even on every rank (the ONNX test data does so for 3-D input too).
    if (p_.mode == SampleMode::Nearest) x = std::nearbyint(x);
    if (x < lo_ || x > hi_) {
      if (p_.padding == PaddingMode::Border) x = std::clamp(x, 0.0, n - 1);
      else if (p_.padding == PaddingMode::Reflection) x = reflect(x, lo_, hi_);
    }
    out.clear();
    if (p_.mode == SampleMode::Nearest) {
      out.push_back({pixel(static_cast<int64_t>(x)), 1.0});
      return;
    }
    double x0 = std::floor(x);
    int64_t i0 = static_cast<int64_t>(x0);
    double t = x - x0;
    if (p_.mode == SampleMode::Linear) {
      out.push_back({pixel(i0), 1 - t});
      out.push_back({pixel(i0 + 1), t});
      return;
    }
    std::array<double, 4> w = cubic_weights(t);
    for (int k = 0; k < 4; ++k) out.push_back({pixel(i0 - 1 + k), w[k]});
  }

 private:
  // Where input index i reads from under the padding mode; -1 reads zero.
  int64_t pixel(int64_t i) const {
    if (i >= 0 && i < extent_) return i;
    switch (p_.padding) {
      case PaddingMode::Zeros: return -1;
      case PaddingMode::Border: return std::clamp<int64_t>(i, 0, extent_ - 1);
      case PaddingMode::Reflection:
        // Truncation toward zero, as the reference's int() does.
        return std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(i), lo_, hi_)), 0, extent_ - 1);
    }
    return -1;
  }

  GridSampleParams p_;
  int64_t extent_;
  double lo_, hi_;
};

OpDef grid_sample_op() {
  OpDef d;
  d.op_type = "GridSample";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "grid");
    require_float_input(c, 0, "X");
    require_float_input(c, 1, "grid");
    grid_sample_params(c.node(), c.opset());
    const Shape& x = c.shape(0);
    const Shape& grid = c.shape(1);
    size_t r = x.size() < 3 ? 0 : x.size() - 2;
    if (r == 0) c.fail("X must be [N, C, D1, ...], got " + shape_str(x));
    if (c.opset() < 20 && r != 2) c.fail("opset " + std::to_string(c.opset()) + " GridSample takes 4-D input only");
    if (grid.size() != r + 2 || grid[0] != x[0] || grid.back() != static_cast<int64_t>(r))
      c.fail("grid must be [N, ..., " + std::to_string(r) + "] of rank " + std::to_string(r + 2) + " for X " +
             shape_str(x) + ", got " + shape_str(grid));
    Shape out = {x[0], x[1]};
    out.insert(out.end(), grid.begin() + 1, grid.end() - 1);
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& grid = c.input(1);
    GridSampleParams p = grid_sample_params(c.node(), c.opset());
    size_t r = x.shape().size() - 2;
    int64_t batch = x.shape()[0], channels = x.shape()[1];
    Shape in_spatial(x.shape().begin() + 2, x.shape().end());
    Shape out_spatial(grid.shape().begin() + 1, grid.shape().end() - 1);
    int64_t in_points = num_elements(in_spatial), out_points = num_elements(out_spatial);
    std::vector<int64_t> in_strides = strides_of(in_spatial);
    std::vector<AxisSampler> samplers;
    for (size_t a = 0; a < r; ++a) samplers.emplace_back(p, in_spatial[a]);
    Shape out_shape = {batch, channels};
    out_shape.insert(out_shape.end(), out_spatial.begin(), out_spatial.end());
    Tensor y(x.dtype(), out_shape);
    std::vector<std::vector<Tap>> axis_taps(r);
    std::vector<int64_t> tap_idx(r), tap_count(r);
    std::vector<std::pair<int64_t, double>> combined;  // (flat input offset, weight)
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t o = 0; o < out_points; ++o) {
        // The grid's last axis lists coordinates innermost axis first (x, y, z).
        for (size_t a = 0; a < r; ++a) {
          samplers[a].taps(grid.get_double((n * out_points + o) * static_cast<int64_t>(r) + (r - 1 - a)), axis_taps[a]);
          tap_count[a] = static_cast<int64_t>(axis_taps[a].size());
        }
        combined.clear();
        std::fill(tap_idx.begin(), tap_idx.end(), 0);
        do {
          int64_t offset = 0;
          double weight = 1;
          for (size_t a = 0; a < r && offset >= 0; ++a) {
            const Tap& t = axis_taps[a][tap_idx[a]];
            if (t.index < 0) offset = -1;
            else offset += t.index * in_strides[a];
            weight *= t.weight;
          }
          if (offset >= 0) combined.emplace_back(offset, weight);
        } while (next_index(tap_idx, tap_count));
        for (int64_t ch = 0; ch < channels; ++ch) {
          int64_t base = (n * channels + ch) * in_points;
          double acc = 0;
          for (const auto& [offset, weight] : combined) acc += weight * x.get_double(base + offset);
          y.set_double((n * channels + ch) * out_points + o, acc);
        }
      }
    c.set_output(0, std::move(y));
  };
  // A multiply-add per tap: 1 (nearest), 2^r (linear) or 4^r (cubic) taps per output element.
  d.flops = [](const NodeShapes& s) {
    std::string mode = s.node.attr_string("mode", "linear");
    double per_axis = mode == "nearest" ? 1 : (mode == "cubic" || mode == "bicubic") ? 4 : 2;
    double r = s.in[0].size() > 2 ? static_cast<double>(s.in[0].size() - 2) : 0;
    return 2.0 * std::pow(per_axis, r) * static_cast<double>(num_elements(s.out[0]));
  };
  return d;
}

// ---- AffineGrid -------------------------------------------------------------------------------------

// theta [N, r, r+1] and size [N, C, D1..Dr] (r = 2 or 3) -> grid [N, D1..Dr, r]: the normalized coordinates
// of every output position, (x, y[, z]) with x along the last axis, transformed by theta.
Shape affine_grid_shape(const Node& node, const Shape& theta, const std::vector<int64_t>& size) {
  if (size.size() != 4 && size.size() != 5) fail(node, "size must have 4 or 5 values, got " + std::to_string(size.size()));
  int64_t r = static_cast<int64_t>(size.size()) - 2;
  if (theta != Shape{size[0], r, r + 1})
    fail(node, "theta must be [" + std::to_string(size[0]) + ", " + std::to_string(r) + ", " + std::to_string(r + 1) +
                   "] for size of length " + std::to_string(size.size()) + ", got " + shape_str(theta));
  Shape out = {size[0]};
  for (int64_t a = 0; a < r; ++a) {
    if (size[2 + a] <= 0) fail(node, "spatial sizes must be positive");
    out.push_back(size[2 + a]);
  }
  out.push_back(r);
  return out;
}

OpDef affine_grid_op() {
  OpDef d;
  d.op_type = "AffineGrid";
  d.infer = [](InferContext& c) {
    c.require_input(0, "theta");
    c.require_input(1, "size");
    require_float_input(c, 0, "theta");
    c.set_output(0, c.dtype(0), affine_grid_shape(c.node(), c.shape(0), constant_ints(c, 1, "size")));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& theta = c.input(0);
    std::vector<int64_t> size = tensor_ints(c.input(1));
    Shape out = affine_grid_shape(c.node(), theta.shape(), size);
    bool align = c.node().attr_int("align_corners", 0) != 0;
    int64_t r = static_cast<int64_t>(size.size()) - 2;
    Shape spatial(out.begin() + 1, out.end() - 1);
    // Normalized position of index i on an axis of extent n: pixel corners or pixel centres span [-1, 1].
    auto coord = [align](int64_t i, int64_t n) {
      if (align) return n == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
      return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n);
    };
    Tensor grid(theta.dtype(), out);
    int64_t points = num_elements(spatial), flat = 0;
    std::vector<double> base(static_cast<size_t>(r + 1));
    for (int64_t n = 0; n < out[0]; ++n) {
      std::vector<int64_t> idx(static_cast<size_t>(r), 0);
      for (int64_t p = 0; p < points; ++p) {
        for (int64_t k = 0; k < r; ++k) base[k] = coord(idx[r - 1 - k], spatial[r - 1 - k]);  // x first
        base[r] = 1.0;
        for (int64_t row = 0; row < r; ++row) {
          double acc = 0;
          for (int64_t k = 0; k <= r; ++k) acc += theta.get_double((n * r + row) * (r + 1) + k) * base[k];
          grid.set_double(flat++, acc);
        }
        next_index(idx, spatial);
      }
    }
    c.set_output(0, std::move(grid));
  };
  // r multiply-adds and one add (the translation) per output coordinate.
  d.flops = [](const NodeShapes& s) {
    double r = static_cast<double>(s.out[0].back());
    return (2 * r + 1) * static_cast<double>(num_elements(s.out[0]));
  };
  return d;
}

// ---- RoiAlign ---------------------------------------------------------------------------------------

struct RoiAlignParams {
  bool max_mode;
  bool half_pixel;
  int64_t out_h, out_w, sampling_ratio;
  double spatial_scale;
};

RoiAlignParams roi_align_params(const Node& node, int64_t opset) {
  RoiAlignParams p{};
  std::string mode = node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") fail(node, "mode must be 'avg' or 'max', got '" + mode + "'");
  p.max_mode = mode == "max";
  // Opset 16 added the attribute, defaulting to half_pixel; opset 10 behaves as output_half_pixel.
  std::string ctm = node.attr_string("coordinate_transformation_mode", opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    fail(node, "coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', got '" + ctm + "'");
  p.half_pixel = ctm == "half_pixel";
  p.out_h = node.attr_int("output_height", 1);
  p.out_w = node.attr_int("output_width", 1);
  p.sampling_ratio = node.attr_int("sampling_ratio", 0);
  p.spatial_scale = node.attr_float("spatial_scale", 1.0);
  if (p.out_h <= 0 || p.out_w <= 0) fail(node, "output_height and output_width must be positive");
  if (p.sampling_ratio < 0) fail(node, "sampling_ratio must not be negative");
  return p;
}

// One bilinear sample: four input offsets and their weights (all zero for a sample outside the map).
struct BilinearSample {
  std::array<int64_t, 4> offset{};
  std::array<double, 4> weight{};
};

BilinearSample roi_sample(double y, double x, int64_t height, int64_t width) {
  BilinearSample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low), hy = 1 - ly, hx = 1 - lx;
  s.offset = {y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high};
  s.weight = {hy * hx, hy * lx, ly * hx, ly * lx};
  return s;
}

OpDef roi_align_op() {
  OpDef d;
  d.op_type = "RoiAlign";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "X" : i == 1 ? "rois" : "batch_indices");
    require_float_input(c, 0, "X");
    require_integer_input(c, 2, "batch_indices");
    RoiAlignParams p = roi_align_params(c.node(), c.opset());
    const Shape& x = c.shape(0);
    if (x.size() != 4) c.fail("X must be [N, C, H, W], got " + shape_str(x));
    if (c.shape(1).size() != 2 || c.shape(1)[1] != 4) c.fail("rois must be [num_rois, 4], got " + shape_str(c.shape(1)));
    if (c.shape(2) != Shape{c.shape(1)[0]}) c.fail("batch_indices must be [num_rois], got " + shape_str(c.shape(2)));
    if (c.dtype(1) != c.dtype(0)) c.fail("rois must have X's dtype");
    c.set_output(0, c.dtype(0), {c.shape(1)[0], x[1], p.out_h, p.out_w});
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& rois = c.input(1);
    const Tensor& batch_indices = c.input(2);
    RoiAlignParams p = roi_align_params(c.node(), c.opset());
    int64_t channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
    int64_t num_rois = rois.shape()[0];
    Tensor y(x.dtype(), {num_rois, channels, p.out_h, p.out_w});
    double shift = p.half_pixel ? 0.5 : 0.0;
    std::vector<BilinearSample> samples;
    for (int64_t roi = 0; roi < num_rois; ++roi) {
      int64_t b = batch_indices.get_int(roi);
      if (b < 0 || b >= x.shape()[0]) c.fail("batch index " + std::to_string(b) + " is out of range");
      double start_w = rois.get_double(roi * 4 + 0) * p.spatial_scale - shift;
      double start_h = rois.get_double(roi * 4 + 1) * p.spatial_scale - shift;
      double roi_w = rois.get_double(roi * 4 + 2) * p.spatial_scale - shift - start_w;
      double roi_h = rois.get_double(roi * 4 + 3) * p.spatial_scale - shift - start_h;
      if (!p.half_pixel) {  // malformed ROIs become 1x1
        roi_w = std::max(roi_w, 1.0);
        roi_h = std::max(roi_h, 1.0);
      }
      double bin_h = roi_h / static_cast<double>(p.out_h), bin_w = roi_w / static_cast<double>(p.out_w);
      int64_t grid_h = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(bin_h));
      int64_t grid_w = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(bin_w));
      int64_t per_bin = grid_h * grid_w;
      // Sample positions are shared by all channels.
      samples.clear();
      for (int64_t ph = 0; ph < p.out_h; ++ph)
        for (int64_t pw = 0; pw < p.out_w; ++pw)
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            double yy = start_h + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              double xx = start_w + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              samples.push_back(roi_sample(yy, xx, height, width));
            }
          }
      for (int64_t ch = 0; ch < channels; ++ch) {
        int64_t base = (b * channels + ch) * height * width;
        for (int64_t bin = 0; bin < p.out_h * p.out_w; ++bin) {
          double acc = 0;
          for (int64_t k = 0; k < per_bin; ++k) {
            const BilinearSample& s = samples[bin * per_bin + k];
            if (p.max_mode) {
              // As the reference: the largest weighted corner, not the interpolated value.
              double v = s.weight[0] * x.get_double(base + s.offset[0]);
              for (int j = 1; j < 4; ++j) v = std::max(v, s.weight[j] * x.get_double(base + s.offset[j]));
              acc = k == 0 ? v : std::max(acc, v);
            } else {
              for (int j = 0; j < 4; ++j) acc += s.weight[j] * x.get_double(base + s.offset[j]);
            }
          }
          if (!p.max_mode) acc /= static_cast<double>(std::max<int64_t>(per_bin, 1));
          y.set_double((roi * channels + ch) * p.out_h * p.out_w + bin, acc);
        }
      }
    }
    c.set_output(0, std::move(y));
  };
  // Per output element: 4 multiply-adds per sample and a divide; an adaptive sampling_ratio (0) depends
  // on the ROI values and is counted as 2x2 samples.
  d.flops = [](const NodeShapes& s) {
    int64_t ratio = s.node.attr_int("sampling_ratio", 0);
    double samples = ratio > 0 ? static_cast<double>(ratio * ratio) : 4.0;
    return (8.0 * samples + 1.0) * static_cast<double>(num_elements(s.out[0]));
  };
  return d;
}

// ---- DeformConv -------------------------------------------------------------------------------------

// 2-D convolution whose taps are displaced by per-position offsets (and optionally scaled by a mask):
// X [N, C, H, W], W [M, C/group, kH, kW], offset [N, G*kH*kW*2, oH, oW] holding (dy, dx) per tap,
// mask [N, G*kH*kW, oH, oW]; G = offset_group splits the input channels. Displaced taps read X
// bilinearly, with zeros outside.
struct DeformGeometry {
  int64_t batch, channels, height, width, out_channels, group, offset_group, kh, kw, out_h, out_w;
  std::vector<int64_t> strides, dilations, pads;
};

DeformGeometry deform_geometry(const Node& node, const Shape& x, const Shape& w, const Shape& offset,
                               const Shape* bias, const Shape* mask) {
  if (x.size() != 4) throw Unsupported(node.label() + ": only 2-D DeformConv (4-D X) is supported, got " + shape_str(x));
  if (w.size() != 4) fail(node, "W must be [M, C/group, kH, kW], got " + shape_str(w));
  DeformGeometry g{};
  g.batch = x[0], g.channels = x[1], g.height = x[2], g.width = x[3], g.out_channels = w[0];
  g.group = node.attr_int("group", 1);
  g.offset_group = node.attr_int("offset_group", 1);
  std::vector<int64_t> kernel = spatial_ints(node, "kernel_shape", 2, 0, 0);
  if (!node.has_attr("kernel_shape")) kernel = {w[2], w[3]};
  if (kernel[0] != w[2] || kernel[1] != w[3]) fail(node, "kernel_shape does not match W " + shape_str(w));
  g.kh = kernel[0], g.kw = kernel[1];
  g.strides = spatial_ints(node, "strides", 2, 1, 1);
  g.dilations = spatial_ints(node, "dilations", 2, 1, 1);
  g.pads = spatial_ints(node, "pads", 4, 0, 0);
  if (g.group <= 0 || g.channels % g.group != 0 || g.out_channels % g.group != 0 || w[1] * g.group != g.channels)
    fail(node, "group " + std::to_string(g.group) + " does not fit X " + shape_str(x) + " and W " + shape_str(w));
  if (g.offset_group <= 0 || g.channels % g.offset_group != 0)
    fail(node, "offset_group " + std::to_string(g.offset_group) + " must divide the " + std::to_string(g.channels) +
                   " input channels");
  g.out_h = (g.height + g.pads[0] + g.pads[2] - ((g.kh - 1) * g.dilations[0] + 1)) / g.strides[0] + 1;
  g.out_w = (g.width + g.pads[1] + g.pads[3] - ((g.kw - 1) * g.dilations[1] + 1)) / g.strides[1] + 1;
  if (g.out_h <= 0 || g.out_w <= 0) fail(node, "the kernel does not fit the padded input");
  int64_t taps = g.offset_group * g.kh * g.kw;
  if (offset != Shape{g.batch, 2 * taps, g.out_h, g.out_w})
    fail(node, "offset must be " + shape_str({g.batch, 2 * taps, g.out_h, g.out_w}) + ", got " + shape_str(offset));
  if (mask && *mask != Shape{g.batch, taps, g.out_h, g.out_w})
    fail(node, "mask must be " + shape_str({g.batch, taps, g.out_h, g.out_w}) + ", got " + shape_str(*mask));
  if (bias && *bias != Shape{g.out_channels}) fail(node, "B must be [" + std::to_string(g.out_channels) + "]");
  return g;
}

// Bilinear read of one H x W plane at (y, x); corners outside the plane count as zero.
double bilinear_zero_padded(const Tensor& x, int64_t base, int64_t height, int64_t width, double y, double xx) {
  double y0 = std::floor(y), x0 = std::floor(xx);
  double ty = y - y0, tx = xx - x0;
  int64_t iy = static_cast<int64_t>(y0), ix = static_cast<int64_t>(x0);
  double acc = 0;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      int64_t py = iy + dy, px = ix + dx;
      if (py < 0 || py >= height || px < 0 || px >= width) continue;
      double wgt = (dy ? ty : 1 - ty) * (dx ? tx : 1 - tx);
      acc += wgt * x.get_double(base + py * width + px);
    }
  return acc;
}

OpDef deform_conv_op() {
  OpDef d;
  d.op_type = "DeformConv";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "X" : i == 1 ? "W" : "offset");
    require_float_input(c, 0, "X");
    DType t = same_dtype_inputs(c);
    DeformGeometry g = deform_geometry(c.node(), c.shape(0), c.shape(1), c.shape(2), c.has_input(3) ? &c.shape(3) : nullptr,
                                       c.has_input(4) ? &c.shape(4) : nullptr);
    c.set_output(0, t, {g.batch, g.out_channels, g.out_h, g.out_w});
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& w = c.input(1);
    const Tensor& offset = c.input(2);
    const Tensor* bias = c.has_input(3) ? &c.input(3) : nullptr;
    const Tensor* mask = c.has_input(4) ? &c.input(4) : nullptr;
    DeformGeometry g = deform_geometry(c.node(), x.shape(), w.shape(), offset.shape(), bias ? &bias->shape() : nullptr,
                                       mask ? &mask->shape() : nullptr);
    int64_t taps = g.kh * g.kw, positions = g.out_h * g.out_w;
    int64_t channels_per_offset_group = g.channels / g.offset_group;
    int64_t cin_per_group = g.channels / g.group, cout_per_group = g.out_channels / g.group;
    Tensor y(x.dtype(), {g.batch, g.out_channels, g.out_h, g.out_w});
    // columns[(c * taps + tap) * positions + pos]: the masked, displaced input seen by each tap.
    std::vector<double> columns(static_cast<size_t>(g.channels * taps * positions));
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t ch = 0; ch < g.channels; ++ch) {
        int64_t og = ch / channels_per_offset_group;
        int64_t plane = (n * g.channels + ch) * g.height * g.width;
        for (int64_t tap = 0; tap < taps; ++tap) {
          int64_t ki = tap / g.kw, kj = tap % g.kw;
          int64_t off_channel = (og * taps + tap) * 2;
          for (int64_t oh = 0; oh < g.out_h; ++oh)
            for (int64_t ow = 0; ow < g.out_w; ++ow) {
              int64_t pos = oh * g.out_w + ow;
              double dy = offset.get_double(((n * 2 * g.offset_group * taps + off_channel) * positions) + pos);
              double dx = offset.get_double(((n * 2 * g.offset_group * taps + off_channel + 1) * positions) + pos);
              double sy = static_cast<double>(oh * g.strides[0] - g.pads[0] + ki * g.dilations[0]) + dy;
              double sx = static_cast<double>(ow * g.strides[1] - g.pads[1] + kj * g.dilations[1]) + dx;
              double v = bilinear_zero_padded(x, plane, g.height, g.width, sy, sx);
              if (mask) v *= mask->get_double((n * g.offset_group * taps + og * taps + tap) * positions + pos);
              columns[(ch * taps + tap) * positions + pos] = v;
            }
        }
      }
      std::vector<double> acc(static_cast<size_t>(positions));
      for (int64_t m = 0; m < g.out_channels; ++m) {
        std::fill(acc.begin(), acc.end(), bias ? bias->get_double(m) : 0.0);
        int64_t first_channel = (m / cout_per_group) * cin_per_group;
        for (int64_t ci = 0; ci < cin_per_group; ++ci)
          for (int64_t tap = 0; tap < taps; ++tap) {
            double wv = w.get_double((m * cin_per_group + ci) * taps + tap);
            const double* col = columns.data() + ((first_channel + ci) * taps + tap) * positions;
            for (int64_t pos = 0; pos < positions; ++pos) acc[pos] += wv * col[pos];
          }
        for (int64_t pos = 0; pos < positions; ++pos) y.set_double((n * g.out_channels + m) * positions + pos, acc[pos]);
      }
    }
    c.set_output(0, std::move(y));
  };
  // The convolution (2 per multiply-add) plus 9 per sampled tap (4 bilinear multiply-adds, the mask).
  d.flops = [](const NodeShapes& s) {
    const Shape& x = s.in[0];
    const Shape& w = s.in[1];
    if (x.size() != 4 || w.size() != 4) return 0.0;
    double taps = static_cast<double>(w[2] * w[3]);
    double out = static_cast<double>(num_elements(s.out[0]));
    double positions = static_cast<double>(s.out[0][2] * s.out[0][3]);
    return 2.0 * out * static_cast<double>(w[1]) * taps + 9.0 * static_cast<double>(x[0] * x[1]) * taps * positions;
  };
  return d;
}

// ---- Col2Im -----------------------------------------------------------------------------------------

// The inverse of im2col: input [N, C * prod(block), L] holds one column per block position; overlapping
// blocks are summed into the image [N, C, image_shape...].
struct Col2ImGeometry {
  int64_t channels, block_size;
  Shape image, block, blocks;  // blocks: block positions per spatial axis
  std::vector<int64_t> strides, dilations, pads;
};

Col2ImGeometry col2im_geometry(const Node& node, const Shape& in, const std::vector<int64_t>& image,
                               const std::vector<int64_t>& block) {
  size_t r = image.size();
  if (r == 0 || block.size() != r)
    fail(node, "image_shape and block_shape must have the same nonzero length");
  if (in.size() != 3) fail(node, "input must be [N, C * prod(block_shape), L], got " + shape_str(in));
  Col2ImGeometry g;
  g.image = image;
  g.block = block;
  g.strides = spatial_ints(node, "strides", r, 1, 1);
  g.dilations = spatial_ints(node, "dilations", r, 1, 1);
  g.pads = spatial_ints(node, "pads", 2 * r, 0, 0);
  g.block_size = 1;
  for (size_t a = 0; a < r; ++a) {
    if (image[a] <= 0 || block[a] <= 0) fail(node, "image_shape and block_shape must be positive");
    g.block_size *= block[a];
    int64_t span = (block[a] - 1) * g.dilations[a] + 1;
    int64_t count = (image[a] + g.pads[a] + g.pads[a + r] - span) / g.strides[a] + 1;
    if (count <= 0) fail(node, "the block does not fit the padded image along axis " + std::to_string(a));
    g.blocks.push_back(count);
  }
  if (in[1] % g.block_size != 0)
    fail(node, "input axis 1 (" + std::to_string(in[1]) + ") is not a multiple of the block size " +
                   std::to_string(g.block_size));
  if (in[2] != num_elements(g.blocks))
    fail(node, "input has " + std::to_string(in[2]) + " blocks, the geometry gives " +
                   std::to_string(num_elements(g.blocks)));
  g.channels = in[1] / g.block_size;
  return g;
}

Shape col2im_output(const Shape& in, const Col2ImGeometry& g) {
  Shape out = {in[0], g.channels};
  out.insert(out.end(), g.image.begin(), g.image.end());
  return out;
}

OpDef col2im_op() {
  OpDef d;
  d.op_type = "Col2Im";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "input" : i == 1 ? "image_shape" : "block_shape");
    if (!is_float(c.dtype(0)) && !is_integer(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    Col2ImGeometry g = col2im_geometry(c.node(), c.shape(0), constant_ints(c, 1, "image_shape"),
                                       constant_ints(c, 2, "block_shape"));
    c.set_output(0, c.dtype(0), col2im_output(c.shape(0), g));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& in = c.input(0);
    Col2ImGeometry g = col2im_geometry(c.node(), in.shape(), tensor_ints(c.input(1)), tensor_ints(c.input(2)));
    size_t r = g.image.size();
    int64_t image_points = num_elements(g.image), block_count = num_elements(g.blocks);
    std::vector<int64_t> image_strides = strides_of(g.image);
    // For every (block element, block position) pair, the image offset it lands on, or -1 in padding.
    std::vector<int64_t> target(static_cast<size_t>(g.block_size * block_count));
    std::vector<int64_t> k(r, 0);
    for (int64_t ki = 0; ki < g.block_size; ++ki) {
      std::vector<int64_t> l(r, 0);
      for (int64_t li = 0; li < block_count; ++li) {
        int64_t offset = 0;
        for (size_t a = 0; a < r && offset >= 0; ++a) {
          int64_t p = l[a] * g.strides[a] - g.pads[a] + k[a] * g.dilations[a];
          offset = p < 0 || p >= g.image[a] ? -1 : offset + p * image_strides[a];
        }
        target[ki * block_count + li] = offset;
        next_index(l, g.blocks);
      }
      next_index(k, g.block);
    }
    int64_t batch = in.shape()[0];
    std::vector<double> acc(static_cast<size_t>(image_points));
    Tensor out(in.dtype(), col2im_output(in.shape(), g));
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t ch = 0; ch < g.channels; ++ch) {
        std::fill(acc.begin(), acc.end(), 0.0);
        int64_t base = (n * g.channels + ch) * g.block_size * block_count;
        for (int64_t i = 0; i < g.block_size * block_count; ++i)
          if (target[i] >= 0) acc[target[i]] += in.get_double(base + i);
        for (int64_t p = 0; p < image_points; ++p) out.set_double((n * g.channels + ch) * image_points + p, acc[p]);
      }
    c.set_output(0, std::move(out));
  };
  // One add per input element.
  d.flops = [](const NodeShapes& s) { return static_cast<double>(num_elements(s.in[0])); };
  return d;
}

}  // namespace

void register_sampling_ops(OpRegistry& r) {
  r.add(grid_sample_op());
  r.add(affine_grid_op());
  r.add(roi_align_op());
  r.add(deform_conv_op());
  r.add(col2im_op());
}

}  // namespace misc
}  // namespace kiln
