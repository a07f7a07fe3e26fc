#include "frontend/ops/resize_geometry.h"

#include <algorithm>
#include <cmath>

#include "frontend/ops/nn_common.h"
#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::nn {
namespace {

ResizeMode parse_mode(const Node& node) {
  std::string m = node.attr_string("mode", "nearest");
  if (m == "nearest") return ResizeMode::Nearest;
  if (m == "linear" || m == "bilinear" || m == "trilinear") return ResizeMode::Linear;
  if (m == "cubic" && node.op_type == "Resize" && node.opset >= 11) return ResizeMode::Cubic;
  fail(node, "unsupported mode '" + m + "'");
}

// The modes Resize-11 introduced; Upsample and Resize-10 have none of them.
void parse_modern_attributes(const Node& node, ResizeSpec& s) {
  s.coordinate_mode = node.attr_string("coordinate_transformation_mode", "half_pixel");
  static const char* known_modes[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(known_modes), std::end(known_modes), s.coordinate_mode) == std::end(known_modes))
    fail(node, "unknown coordinate_transformation_mode '" + s.coordinate_mode + "'");
  s.nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
  if (s.nearest_mode != "round_prefer_floor" && s.nearest_mode != "round_prefer_ceil" && s.nearest_mode != "floor" &&
      s.nearest_mode != "ceil")
    fail(node, "unknown nearest_mode '" + s.nearest_mode + "'");
  s.cubic_a = node.attr_float("cubic_coeff_a", -0.75);
  s.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  s.extrapolation_value = node.attr_float("extrapolation_value", 0);
  s.antialias = node.attr_int("antialias", 0) != 0;
  if (s.antialias && s.mode == ResizeMode::Nearest) fail(node, "antialias is not defined for mode nearest");
}

// Output extents and per-axis scales from whichever of scales / sizes is given, with sizes'
// keep_aspect_ratio_policy (one common scale, sizes rounded half up).
void set_extents(const Node& node, ResizeSpec& s, const std::vector<int64_t>& axes, const Tensor* scales,
                 const Tensor* sizes) {
  const Shape& in = s.in;
  size_t naxes = axes.size();
  s.scales.assign(in.size(), 1.0);
  s.out = in;
  if (scales && sizes) fail(node, "only one of scales and sizes may be given");
  if (scales) {
    if (static_cast<size_t>(scales->size()) != naxes)
      fail(node, "scales has " + std::to_string(scales->size()) + " values, expected " + std::to_string(naxes));
    for (size_t i = 0; i < naxes; ++i) {
      double sc = scales->get_double(static_cast<int64_t>(i));
      if (!(sc > 0)) fail(node, "scales must be positive");
      s.scales[axes[i]] = sc;
      s.out[axes[i]] = static_cast<int64_t>(std::floor(sc * static_cast<double>(in[axes[i]])));
    }
  } else if (sizes) {
    if (static_cast<size_t>(sizes->size()) != naxes)
      fail(node, "sizes has " + std::to_string(sizes->size()) + " values, expected " + std::to_string(naxes));
    for (size_t i = 0; i < naxes; ++i) {
      int64_t sz = sizes->get_int(static_cast<int64_t>(i));
      if (sz < 1) fail(node, "sizes must be positive");
      if (in[axes[i]] == 0) fail(node, "cannot resize an empty axis to a given size");
      s.out[axes[i]] = sz;
      s.scales[axes[i]] = static_cast<double>(sz) / static_cast<double>(in[axes[i]]);
    }
    std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      double common = s.scales[axes[0]];
      for (int64_t a : axes)
        common = policy == "not_larger" ? std::min(common, s.scales[a]) : std::max(common, s.scales[a]);
      for (int64_t a : axes) {
        s.scales[a] = common;
        s.out[a] = static_cast<int64_t>(common * static_cast<double>(in[a]) + 0.5);
      }
    } else if (policy != "stretch") {
      fail(node, "unknown keep_aspect_ratio_policy '" + policy + "'");
    }
  } else {
    fail(node, "one of scales and sizes must be given");
  }
  s.output_widths.resize(in.size());
  for (size_t a = 0; a < in.size(); ++a)
    s.output_widths[a] = sizes ? static_cast<double>(s.out[a]) : s.scales[a] * static_cast<double>(in[a]);
}

// Upsample-7's scales attribute as a tensor, so both forms go through one path.
Tensor upsample_attr_scales(const Node& node) {
  std::vector<double> v = node.attr_floats("scales");
  if (v.empty()) fail(node, "missing required attribute 'scales'");
  return Tensor::from_doubles(DType::Float32, {static_cast<int64_t>(v.size())}, v);
}

}  // namespace

ResizeInputs resize_inputs(const Node& node) {
  if (node.op_type == "Upsample") return node.opset >= 9 ? ResizeInputs{SIZE_MAX, 1, SIZE_MAX} : ResizeInputs{};
  if (node.opset < 11) return ResizeInputs{SIZE_MAX, 1, SIZE_MAX};
  return ResizeInputs{1, 2, 3};
}

const char* resize_operand_name(ResizeOperand what) {
  switch (what) {
    case ResizeOperand::Roi: return "roi";
    case ResizeOperand::Scales: return "scales";
    case ResizeOperand::Sizes: return "sizes";
  }
  return "?";
}

std::vector<int64_t> resize_axes(const Node& node, int64_t rank) {
  if (!node.has_attr("axes")) {
    std::vector<int64_t> all(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) all[i] = i;
    return all;
  }
  std::vector<int64_t> axes = normalize_axes(node, node.attr_ints("axes"), rank);
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) fail(node, "axes has duplicates");
  return axes;
}

ResizeSpec resize_spec(const Node& node, const Shape& in, const ResizeOperandLookup& operand) {
  ResizeSpec s;
  s.in = in;
  s.mode = parse_mode(node);
  s.legacy = node.op_type == "Upsample" || node.opset < 11;
  if (s.legacy) s.coordinate_mode = "asymmetric";
  else parse_modern_attributes(node, s);

  ResizeInputs ri = resize_inputs(node);
  auto value = [&](size_t i, ResizeOperand what) { return i == SIZE_MAX ? nullptr : operand(i, what); };
  Tensor attr_scales;
  const Tensor* scales = value(ri.scales, ResizeOperand::Scales);
  if (ri.scales == SIZE_MAX) {
    attr_scales = upsample_attr_scales(node);
    scales = &attr_scales;
  }
  std::vector<int64_t> axes = resize_axes(node, static_cast<int64_t>(in.size()));
  set_extents(node, s, axes, scales, value(ri.sizes, ResizeOperand::Sizes));

  s.roi_start.assign(in.size(), 0.0);
  s.roi_end.assign(in.size(), 1.0);
  const Tensor* roi = s.coordinate_mode == "tf_crop_and_resize" ? value(ri.roi, ResizeOperand::Roi) : nullptr;
  if (roi) {
    size_t naxes = axes.size();
    if (static_cast<size_t>(roi->size()) != 2 * naxes)
      fail(node, "roi has " + std::to_string(roi->size()) + " values, expected " + std::to_string(2 * naxes));
    for (size_t i = 0; i < naxes; ++i) {
      s.roi_start[axes[i]] = roi->get_double(static_cast<int64_t>(i));
      s.roi_end[axes[i]] = roi->get_double(static_cast<int64_t>(i + naxes));
    }
  }
  return s;
}

double source_coordinate(const ResizeSpec& s, size_t axis, int64_t o) {
  double x = static_cast<double>(o), scale = s.scales[axis], width = s.output_widths[axis];
  double in = static_cast<double>(s.in[axis]);
  const std::string& m = s.coordinate_mode;
  if (m == "asymmetric") return x / scale;
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "align_corners") return width == 1 ? 0.0 : x * (in - 1) / (width - 1);
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m == "half_pixel_symmetric") {
    // Centres the sampled region when the integer output extent rounded the scaled one down.
    double adjustment = static_cast<double>(s.out[axis]) / width;
    double offset = in / 2 * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  // tf_crop_and_resize: output spans the region of interest [start, end] of the input.
  double start = s.roi_start[axis], end = s.roi_end[axis];
  double rel = width == 1 ? (end - start) * (in - 1) / 2 : x * (end - start) * (in - 1) / (width - 1);
  return rel + start * (in - 1);
}

double cubic_kernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

int64_t nearest_index(const ResizeSpec& s, size_t axis, double x) {
  double fl = std::floor(x), frac = x - fl;
  bool up;  // take the upper neighbour
  if (frac == 0) up = false;
  else if (s.legacy) up = s.scales[axis] < 1;
  else if (s.nearest_mode == "round_prefer_floor") up = frac > 0.5;
  else if (s.nearest_mode == "round_prefer_ceil") up = frac >= 0.5;
  else up = s.nearest_mode == "ceil";
  return std::clamp<int64_t>(static_cast<int64_t>(fl) + up, 0, s.in[axis] - 1);
}

TapLayout tap_layout(const ResizeSpec& s, size_t axis) {
  TapLayout l;
  l.kernel_scale = s.antialias ? std::min(s.scales[axis], 1.0) : 1.0;
  if (s.mode == ResizeMode::Linear && s.antialias) l.first = static_cast<int64_t>(std::floor(-1 / l.kernel_scale)) + 1;
  if (s.mode == ResizeMode::Cubic)
    l.first = s.antialias ? static_cast<int64_t>(std::floor(-2 / l.kernel_scale)) + 1 : -1;
  l.taps = s.mode == ResizeMode::Nearest ? 1 : 2 - 2 * l.first;
  return l;
}

bool normalizes_weights(const ResizeSpec& s) { return s.antialias || s.exclude_outside; }

AxisTable axis_table(const ResizeSpec& s, size_t axis) {
  AxisTable t;
  t.layout = tap_layout(s, axis);
  int64_t in = s.in[axis], out = s.out[axis], taps = t.layout.taps, first = t.layout.first;
  t.index.resize(static_cast<size_t>(out * taps));
  t.weight.resize(static_cast<size_t>(out * taps));
  t.inside.assign(static_cast<size_t>(out), 1);
  t.identity = out == in;
  for (int64_t o = 0; o < out; ++o) {
    double x = source_coordinate(s, axis, o);
    if (s.coordinate_mode == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) {
      t.inside[o] = 0;
      t.any_outside = true;
      t.identity = false;
    }
    int64_t* idx = &t.index[o * taps];
    double* w = &t.weight[o * taps];
    if (s.mode == ResizeMode::Nearest) {
      idx[0] = nearest_index(s, axis, x);
      w[0] = 1;
    } else {
      // base is the neighbour at or below x with ratio in (0, 1] (an integral x counts as ratio 1).
      double base = std::ceil(x) - 1, ratio = x - base, sum = 0;
      for (int64_t j = 0; j < taps; ++j) {
        double d = (static_cast<double>(first + j) - ratio) * t.layout.kernel_scale;
        w[j] = s.mode == ResizeMode::Linear ? std::max(0.0, 1 - std::fabs(d)) : cubic_kernel(d, s.cubic_a);
        int64_t pos = static_cast<int64_t>(base) + first + j;
        if (s.exclude_outside && (pos < 0 || pos >= in)) w[j] = 0;
        idx[j] = std::clamp<int64_t>(pos, 0, in - 1);
        sum += w[j];
      }
      if (normalizes_weights(s) && sum != 0)
        for (int64_t j = 0; j < taps; ++j) w[j] /= sum;
    }
    for (int64_t j = 0; j < taps && t.identity; ++j)
      if (w[j] != 0 && (w[j] != 1 || idx[j] != o)) t.identity = false;
  }
  return t;
}

}  // namespace kiln::nn
