// Resize and its deprecated predecessor Upsample.
//
// Resizing is separable: every output coordinate along an axis maps to an input coordinate
// (coordinate_transformation_mode), and the value there is a weighted sum of a few input neighbours
// along that axis (mode and its coefficients). Each axis gets a table of (index, weight) taps per
// output coordinate; nearest mode gathers through the tables, linear and cubic apply them one axis at a
// time.
#include <algorithm>
#include <cmath>

#include "frontend/ops/nn_common.h"
#include "frontend/ops/op_util.h"

namespace kiln::nn {
namespace {

enum class Mode { Nearest, Linear, Cubic };

struct ResizeSpec {
  Mode mode = Mode::Nearest;
  std::string coordinate_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  // Upsample and Resize-10 predate the modes: asymmetric coordinates, and nearest takes floor when
  // upsampling and ceil when downsampling (what onnxruntime does for them).
  bool legacy = false;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  bool antialias = false;
  Shape in, out;
  std::vector<double> scales;              // per axis
  std::vector<double> output_widths;       // per axis: scale * in, possibly fractional
  std::vector<double> roi_start, roi_end;  // per axis, tf_crop_and_resize only
};

Mode parse_mode(const Node& node) {
  std::string m = node.attr_string("mode", "nearest");
  if (m == "nearest") return Mode::Nearest;
  if (m == "linear" || m == "bilinear" || m == "trilinear") return Mode::Linear;
  if (m == "cubic" && node.op_type == "Resize" && node.opset >= 11) return Mode::Cubic;
  fail(node, "unsupported mode '" + m + "'");
}

// The axes `scales`/`sizes`/`roi` refer to: the `axes` attribute (opset 18) or all of them.
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

// Builds the spec from the node and the values of its scales / sizes / roi inputs (nullptr when
// absent or empty). Shape inference and the kernel both call this, so they agree by construction.
ResizeSpec resize_spec(const Node& node, const Shape& in, const Tensor* roi, const Tensor* scales,
                       const Tensor* sizes) {
  ResizeSpec s;
  s.in = in;
  s.mode = parse_mode(node);
  int64_t rank = static_cast<int64_t>(in.size());
  s.legacy = node.op_type == "Upsample" || node.opset < 11;
  if (!s.legacy) {
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
    if (s.antialias && s.mode == Mode::Nearest) fail(node, "antialias is not defined for mode nearest");
  } else {
    s.coordinate_mode = "asymmetric";
  }

  std::vector<int64_t> axes = resize_axes(node, rank);
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
      // One scale for all the given axes, the smallest or largest of them; sizes round half up.
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

  s.roi_start.assign(in.size(), 0.0);
  s.roi_end.assign(in.size(), 1.0);
  if (s.coordinate_mode == "tf_crop_and_resize" && roi) {
    if (static_cast<size_t>(roi->size()) != 2 * naxes)
      fail(node, "roi has " + std::to_string(roi->size()) + " values, expected " + std::to_string(2 * naxes));
    for (size_t i = 0; i < naxes; ++i) {
      s.roi_start[axes[i]] = roi->get_double(static_cast<int64_t>(i));
      s.roi_end[axes[i]] = roi->get_double(static_cast<int64_t>(i + naxes));
    }
  }
  return s;
}

// The input coordinate that output coordinate `o` along `axis` samples.
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

// Per output coordinate along one axis: `taps` (index, weight) pairs and whether it lies outside the
// crop region (tf_crop_and_resize), where the output is extrapolation_value.
struct AxisTable {
  int64_t taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<char> outside;
  bool identity = true;
};

AxisTable axis_table(const ResizeSpec& s, size_t axis) {
  AxisTable t;
  int64_t in = s.in[axis], out = s.out[axis];
  double scale = s.scales[axis];
  // Linear and cubic read neighbours starting `first` positions from the base index; antialiasing
  // (downscaling only) stretches the kernel by 1/scale and so widens the footprint.
  double kernel_scale = s.antialias ? std::min(scale, 1.0) : 1.0;
  int64_t first = 0;
  if (s.mode == Mode::Linear) first = s.antialias ? static_cast<int64_t>(std::floor(-1 / kernel_scale)) + 1 : 0;
  if (s.mode == Mode::Cubic) first = s.antialias ? static_cast<int64_t>(std::floor(-2 / kernel_scale)) + 1 : -1;
  t.taps = s.mode == Mode::Nearest ? 1 : 2 - 2 * first;
  t.index.resize(static_cast<size_t>(out * t.taps));
  t.weight.resize(static_cast<size_t>(out * t.taps));
  t.outside.assign(static_cast<size_t>(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    double x = source_coordinate(s, axis, o);
    if (s.coordinate_mode == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) t.outside[o] = 1;
    int64_t* idx = &t.index[o * t.taps];
    double* w = &t.weight[o * t.taps];
    if (s.mode == Mode::Nearest) {
      double fl = std::floor(x), frac = x - fl;
      bool up;  // take the upper neighbour
      if (frac == 0) up = false;
      else if (s.legacy) up = scale < 1;
      else if (s.nearest_mode == "round_prefer_floor") up = frac > 0.5;
      else if (s.nearest_mode == "round_prefer_ceil") up = frac >= 0.5;
      else up = s.nearest_mode == "ceil";
      idx[0] = std::clamp<int64_t>(static_cast<int64_t>(fl) + up, 0, in - 1);
      w[0] = 1;
    } else {
      // base is the neighbour at or below x with ratio in (0, 1] (an integral x counts as ratio 1).
      double base = std::ceil(x) - 1;
      double ratio = x - base;
      double sum = 0;
      for (int64_t j = 0; j < t.taps; ++j) {
        double d = (static_cast<double>(first + j) - ratio) * kernel_scale;
        w[j] = s.mode == Mode::Linear ? std::max(0.0, 1 - std::fabs(d)) : cubic_kernel(d, s.cubic_a);
        int64_t pos = static_cast<int64_t>(base) + first + j;
        if (s.exclude_outside && (pos < 0 || pos >= in)) w[j] = 0;
        idx[j] = std::clamp<int64_t>(pos, 0, in - 1);
        sum += w[j];
      }
      if ((s.antialias || s.exclude_outside) && sum != 0)
        for (int64_t j = 0; j < t.taps; ++j) w[j] /= sum;
    }
    if (t.outside[o] || out != in) t.identity = false;
    for (int64_t j = 0; j < t.taps && t.identity; ++j)
      if (w[j] != 0 && (w[j] != 1 || idx[j] != o)) t.identity = false;
  }
  return t;
}

Tensor resize_eval(const ResizeSpec& s, const Tensor& x) {
  size_t r = s.in.size();
  std::vector<AxisTable> tables;
  for (size_t a = 0; a < r; ++a) tables.push_back(axis_table(s, a));
  Tensor y(x.dtype(), s.out);
  bool crop = s.coordinate_mode == "tf_crop_and_resize";
  if (s.mode == Mode::Nearest) {
    // A gather: exact for every dtype, integers included.
    std::vector<int64_t> in_strides = strides_of(s.in), o(r, 0);
    for (int64_t i = 0; i < y.size(); ++i, next_index(o, s.out)) {
      int64_t src = 0;
      bool outside = false;
      for (size_t a = 0; a < r; ++a) {
        src += tables[a].index[o[a]] * in_strides[a];
        outside |= tables[a].outside[o[a]] != 0;
      }
      if (outside) y.set_double(i, s.extrapolation_value);
      else if (x.is_float_dtype()) y.set_double(i, x.get_double(src));
      else y.set_int(i, x.get_int(src));
    }
    return y;
  }
  // Linear and cubic: one axis at a time, innermost first, in double.
  std::vector<double> cur = x.to_doubles();
  Shape cur_shape = s.in;
  for (size_t a = r; a-- > 0;) {
    const AxisTable& t = tables[a];
    if (t.identity) continue;
    int64_t outer = num_elements(Shape(cur_shape.begin(), cur_shape.begin() + static_cast<int64_t>(a)));
    int64_t inner = num_elements(Shape(cur_shape.begin() + static_cast<int64_t>(a) + 1, cur_shape.end()));
    int64_t in_extent = cur_shape[a], out_extent = s.out[a];
    std::vector<double> next(static_cast<size_t>(outer * out_extent * inner), 0.0);
    for (int64_t p = 0; p < outer; ++p)
      for (int64_t o = 0; o < out_extent; ++o) {
        double* dst = &next[(p * out_extent + o) * inner];
        for (int64_t j = 0; j < t.taps; ++j) {
          double w = t.weight[o * t.taps + j];
          if (w == 0) continue;
          const double* src = &cur[(p * in_extent + t.index[o * t.taps + j]) * inner];
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        }
      }
    cur = std::move(next);
    cur_shape[a] = out_extent;
  }
  std::vector<int64_t> o(r, 0);
  for (int64_t i = 0; i < y.size(); ++i, next_index(o, s.out)) {
    bool outside = false;
    if (crop)
      for (size_t a = 0; a < r; ++a) outside |= tables[a].outside[o[a]] != 0;
    y.set_double(i, outside ? s.extrapolation_value : cur[i]);
  }
  return y;
}

// Which inputs hold roi / scales / sizes for this op and opset (SIZE_MAX: none).
struct ResizeInputs {
  size_t roi = SIZE_MAX, scales = SIZE_MAX, sizes = SIZE_MAX;
};

ResizeInputs resize_inputs(const Node& node) {
  if (node.op_type == "Upsample") return node.opset >= 9 ? ResizeInputs{SIZE_MAX, 1, SIZE_MAX} : ResizeInputs{};
  if (node.opset < 11) return ResizeInputs{SIZE_MAX, 1, SIZE_MAX};
  return ResizeInputs{1, 2, 3};
}

// Upsample-7's scales attribute as a tensor, so both forms go through one path.
Tensor upsample_attr_scales(const Node& node) {
  std::vector<double> v = node.attr_floats("scales");
  if (v.empty()) fail(node, "missing required attribute 'scales'");
  return Tensor::from_doubles(DType::Float32, {static_cast<int64_t>(v.size())}, v);
}

OpDef resize_op(std::string name) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_supported(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    ResizeInputs ri = resize_inputs(c.node());
    auto given = [&](size_t i) { return i != SIZE_MAX && c.has_input(i) && num_elements(c.shape(i)) > 0; };
    const Tensor* scales = nullptr;
    const Tensor* sizes = nullptr;
    Tensor attr_scales;
    if (ri.scales == SIZE_MAX) {
      attr_scales = upsample_attr_scales(c.node());
      scales = &attr_scales;
    } else if (given(ri.scales)) {
      scales = &c.require_constant(ri.scales, "scales");
    }
    if (given(ri.sizes)) sizes = &c.require_constant(ri.sizes, "sizes");
    ResizeSpec s = resize_spec(c.node(), c.shape(0), nullptr, scales, sizes);
    c.set_output(0, c.dtype(0), s.out);
  };
  d.eval = [](EvalContext& c) {
    ResizeInputs ri = resize_inputs(c.node());
    auto given = [&](size_t i) -> const Tensor* {
      return i != SIZE_MAX && c.has_input(i) && c.input(i).size() > 0 ? &c.input(i) : nullptr;
    };
    Tensor attr_scales;
    const Tensor* scales = given(ri.scales);
    if (ri.scales == SIZE_MAX) {
      attr_scales = upsample_attr_scales(c.node());
      scales = &attr_scales;
    }
    const Tensor& x = c.input(0);
    ResizeSpec s = resize_spec(c.node(), x.shape(), given(ri.roi), scales, given(ri.sizes));
    c.set_output(0, resize_eval(s, x));
  };
  d.flops = [](const NodeShapes& s) {
    // Direct (non-separable) count: 2 per tap, taps = 2 (linear) or 4 (cubic) per resized axis.
    std::string mode = s.node.attr_string("mode", "nearest");
    if (mode == "nearest") return 0.0;
    double taps_per_axis = mode == "cubic" ? 4 : 2, taps = 1;
    for (size_t a = 0; a < s.out[0].size() && a < s.in[0].size(); ++a)
      if (s.in[0][a] != s.out[0][a]) taps *= taps_per_axis;
    return 2 * taps * static_cast<double>(num_elements(s.out[0]));
  };
  return d;
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add(resize_op("Resize"));
  r.add(resize_op("Upsample"));
}

}  // namespace kiln::nn
