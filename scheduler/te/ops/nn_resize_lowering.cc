// Resize and Upsample as tensor expressions.
//
// Resizing is separable and its geometry is static: for every output coordinate along an axis the
// input neighbours it reads and their weights depend only on attributes and the (constant) scales,
// sizes and roi. The lowering computes those per-axis tables at compile time, in double, exactly as
// the reference kernel does, and embeds them as constant tensors; the stages then gather through the
// index tables (nearest) or reduce over the taps one resized axis at a time (linear, cubic), as the
// reference does. Table indices are clamped again where they are loaded, so a gather cannot leave
// the input whatever a table holds.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "frontend/ops/op_util.h"
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

enum class Mode { Nearest, Linear, Cubic };

// Everything that fixes the sampling geometry, per axis where it varies.
struct ResizeSpec {
  Mode mode = Mode::Nearest;
  std::string coordinate_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  bool legacy = false;  // Upsample and Resize-10: asymmetric, nearest floors up- and ceils downsampling
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  bool antialias = false;
  Shape in, out;
  std::vector<double> scales, widths;  // widths: scale * input extent (or the requested size)
  std::vector<double> roi_start, roi_end;
};

Mode parse_mode(const Node& node) {
  std::string m = node.attr_string("mode", "nearest");
  if (m == "nearest") return Mode::Nearest;
  if (m == "linear" || m == "bilinear" || m == "trilinear") return Mode::Linear;
  if (m == "cubic" && node.op_type == "Resize" && node.opset >= 11) return Mode::Cubic;
  nn::fail(node, "unsupported mode '" + m + "'");
}

// The axes that scales / sizes / roi list (the opset-18 `axes` attribute, else all).
std::vector<int64_t> listed_axes(const Node& node, int64_t rank) {
  if (node.has_attr("axes")) return normalize_axes(node, node.attr_ints("axes"), rank);
  std::vector<int64_t> all(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) all[i] = i;
  return all;
}

// Output extents and per-axis scales from whichever of scales / sizes is given, with sizes'
// keep_aspect_ratio_policy (one common scale, sizes rounded half up).
void set_extents(const Node& node, ResizeSpec& s, const std::vector<int64_t>& axes, const Tensor* scales,
                 const Tensor* sizes) {
  s.scales.assign(s.in.size(), 1.0);
  s.out = s.in;
  if (scales) {
    for (size_t i = 0; i < axes.size(); ++i) {
      double sc = scales->get_double(static_cast<int64_t>(i));
      s.scales[axes[i]] = sc;
      s.out[axes[i]] = static_cast<int64_t>(std::floor(sc * static_cast<double>(s.in[axes[i]])));
    }
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      s.out[axes[i]] = sizes->get_int(static_cast<int64_t>(i));
      s.scales[axes[i]] = static_cast<double>(s.out[axes[i]]) / static_cast<double>(s.in[axes[i]]);
    }
    std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      double common = s.scales[axes[0]];
      for (int64_t a : axes)
        common = policy == "not_larger" ? std::min(common, s.scales[a]) : std::max(common, s.scales[a]);
      for (int64_t a : axes) {
        s.scales[a] = common;
        s.out[a] = static_cast<int64_t>(common * static_cast<double>(s.in[a]) + 0.5);
      }
    }
  }
  s.widths.resize(s.in.size());
  for (size_t a = 0; a < s.in.size(); ++a)
    s.widths[a] = sizes ? static_cast<double>(s.out[a]) : s.scales[a] * static_cast<double>(s.in[a]);
}

ResizeSpec make_spec(const Node& node, const Shape& in, const Tensor* roi, const Tensor* scales, const Tensor* sizes) {
  ResizeSpec s;
  s.in = in;
  s.mode = parse_mode(node);
  s.legacy = node.op_type == "Upsample" || node.opset < 11;
  if (s.legacy) {
    s.coordinate_mode = "asymmetric";
  } else {
    s.coordinate_mode = node.attr_string("coordinate_transformation_mode", "half_pixel");
    s.nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
    s.cubic_a = node.attr_float("cubic_coeff_a", -0.75);
    s.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
    s.extrapolation_value = node.attr_float("extrapolation_value", 0);
    s.antialias = node.attr_int("antialias", 0) != 0;
  }
  std::vector<int64_t> axes = listed_axes(node, static_cast<int64_t>(in.size()));
  set_extents(node, s, axes, scales, sizes);
  s.roi_start.assign(in.size(), 0.0);
  s.roi_end.assign(in.size(), 1.0);
  if (s.coordinate_mode == "tf_crop_and_resize" && roi)
    for (size_t i = 0; i < axes.size(); ++i) {
      s.roi_start[axes[i]] = roi->get_double(static_cast<int64_t>(i));
      s.roi_end[axes[i]] = roi->get_double(static_cast<int64_t>(i + axes.size()));
    }
  return s;
}

// The input coordinate output coordinate o samples along `axis` (coordinate_transformation_mode).
double source_coordinate(const ResizeSpec& s, size_t axis, int64_t o) {
  double x = static_cast<double>(o), scale = s.scales[axis], width = s.widths[axis];
  double in = static_cast<double>(s.in[axis]);
  const std::string& m = s.coordinate_mode;
  if (m == "asymmetric") return x / scale;
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "align_corners") return width == 1 ? 0.0 : x * (in - 1) / (width - 1);
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(s.out[axis]) / width;
    return in / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  double start = s.roi_start[axis], end = s.roi_end[axis];  // tf_crop_and_resize
  double rel = width == 1 ? (end - start) * (in - 1) / 2 : x * (end - start) * (in - 1) / (width - 1);
  return rel + start * (in - 1);
}

double cubic_weight(double d, double a) {
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
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

ResizeSpec spec_of(const LowerContext& c) {
  ResizeInputs ri = resize_inputs(c.node());
  auto given = [&](size_t i, const char* what) -> const Tensor* {
    if (i == SIZE_MAX || !c.has_input(i) || num_elements(c.shape(i)) == 0) return nullptr;
    return &c.require_constant(i, what);
  };
  Tensor attr_scales;  // Upsample-7 has its scales as an attribute
  const Tensor* scales = given(ri.scales, "scales");
  if (ri.scales == SIZE_MAX) {
    std::vector<double> v = c.node().attr_floats("scales");
    attr_scales = Tensor::from_doubles(DType::Float32, {static_cast<int64_t>(v.size())}, v);
    scales = &attr_scales;
  }
  // A roi known only at run time leaves the crop region at its default here; lower_resize then
  // computes the tables of the axes it lists with stages.
  const Tensor* roi = ri.roi != SIZE_MAX && c.has_input(ri.roi) ? c.constant(ri.roi) : nullptr;
  if (roi && roi->size() == 0) roi = nullptr;
  return make_spec(c.node(), c.shape(0), roi, scales, given(ri.sizes, "sizes"));
}

// How one axis's taps sit around the source coordinate: `taps` neighbours starting `first` from the
// base index. Antialiasing (downscaling only) stretches the kernel by 1 / scale, widening it.
struct TapLayout {
  int64_t first = 0, taps = 1;
  double kernel_scale = 1;
};

TapLayout tap_layout(const ResizeSpec& s, size_t axis) {
  TapLayout l;
  l.kernel_scale = s.antialias ? std::min(s.scales[axis], 1.0) : 1.0;
  if (s.mode == Mode::Linear && s.antialias) l.first = static_cast<int64_t>(std::floor(-1 / l.kernel_scale)) + 1;
  if (s.mode == Mode::Cubic) l.first = s.antialias ? static_cast<int64_t>(std::floor(-2 / l.kernel_scale)) + 1 : -1;
  l.taps = s.mode == Mode::Nearest ? 1 : 2 - 2 * l.first;
  return l;
}

bool normalizes_weights(const ResizeSpec& s) { return s.antialias || s.exclude_outside; }

// One axis's sampling computed at compile time: per output coordinate `taps` (input index, weight)
// pairs, and whether it lies inside the crop region (tf_crop_and_resize; outside, the output is
// extrapolation_value).
struct AxisTable {
  TapLayout layout;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<int64_t> inside;
  bool identity = true;  // reads input coordinate o for output coordinate o, with weight 1
  bool any_outside = false;
};

// Nearest: the neighbour below or above the source coordinate, by nearest_mode.
int64_t nearest_index(const ResizeSpec& s, size_t axis, double x) {
  double fl = std::floor(x), frac = x - fl;
  bool up;
  if (frac == 0) up = false;
  else if (s.legacy) up = s.scales[axis] < 1;
  else if (s.nearest_mode == "round_prefer_floor") up = frac > 0.5;
  else if (s.nearest_mode == "round_prefer_ceil") up = frac >= 0.5;
  else up = s.nearest_mode == "ceil";
  return std::clamp<int64_t>(static_cast<int64_t>(fl) + up, 0, s.in[axis] - 1);
}

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
    if (s.mode == Mode::Nearest) {
      idx[0] = nearest_index(s, axis, x);
      w[0] = 1;
    } else {
      // base: the neighbour at or below x at distance ratio in (0, 1].
      double base = std::ceil(x) - 1, ratio = x - base, sum = 0;
      for (int64_t j = 0; j < taps; ++j) {
        double d = (static_cast<double>(first + j) - ratio) * t.layout.kernel_scale;
        w[j] = s.mode == Mode::Linear ? std::max(0.0, 1 - std::fabs(d)) : cubic_weight(d, s.cubic_a);
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

// ---- The tensors the resize stages read ----------------------------------------------------------

// Per axis: index [out, taps] (null for an axis that maps every coordinate to itself), weight
// [out, taps] (linear and cubic), inside [out] (null when no coordinate leaves the crop region).
struct AxisTensors {
  int64_t taps = 1;
  TensorRef index, weight, inside;
};

template <typename T>
TensorRef constant_table(const LowerContext& c, const std::string& name, DType t, const Shape& shape,
                         const std::vector<T>& v) {
  Tensor value;
  if constexpr (std::is_floating_point_v<T>) value = Tensor::from_doubles(t, shape, v);
  else value = Tensor::from_ints(t, shape, v);
  return placeholder(c.name(name), t, shape, std::make_shared<const Tensor>(std::move(value)));
}

// Static geometry: the tables computed at compile time, as constant tensors.
AxisTensors static_axis(const LowerContext& c, const ResizeSpec& s, size_t a, DType weight_dtype) {
  AxisTable tab = axis_table(s, a);
  AxisTensors ax;
  ax.taps = tab.layout.taps;
  std::string suffix = std::to_string(a);
  Shape shape{s.out[a], tab.layout.taps};
  if (!tab.identity) ax.index = constant_table(c, "index" + suffix, DType::Int64, shape, tab.index);
  if (!tab.identity && s.mode != Mode::Nearest)
    ax.weight = constant_table(c, "weight" + suffix, weight_dtype, shape, tab.weight);
  if (tab.any_outside) ax.inside = constant_table(c, "inside" + suffix, DType::Bool, {s.out[a]}, tab.inside);
  return ax;
}

Expr f64(double v) { return float_imm(v, DType::Float64); }
Expr clamp_index(const Expr& i, int64_t extent) { return min(max(i, int_imm(0)), int_imm(extent - 1)); }

// tf_crop_and_resize with its region of interest only known at run time: the same tables, computed
// by stages from the roi input with the reference's double arithmetic, operation for operation.
// `slot` is the axis's position in the roi's start (and, `listed` later, end) values.
AxisTensors dynamic_axis(const LowerContext& c, const ResizeSpec& s, size_t a, DType weight_dtype,
                         const TensorRef& roi, int64_t slot, int64_t listed) {
  const DType F64 = DType::Float64;
  std::string suffix = std::to_string(a);
  int64_t in = s.in[a], out = s.out[a];
  double width = s.widths[a], in1 = static_cast<double>(in - 1);
  TensorRef coord = compute(c.name("coord" + suffix), "injective", F64, {out}, [&](const std::vector<Expr>& idx) {
    Expr start = cast(F64, at(roi, {int_imm(slot)})), end = cast(F64, at(roi, {int_imm(slot + listed)}));
    Expr rel = width == 1 ? (end - start) * f64(in1) / f64(2) : cast(F64, idx[0]) * (end - start) * f64(in1) / f64(width - 1);
    return rel + start * f64(in1);
  });
  AxisTensors t;
  TapLayout l = tap_layout(s, a);
  t.taps = l.taps;
  Shape shape{out, l.taps};
  t.inside = compute(c.name("inside" + suffix), "injective", DType::Bool, {out}, [&](const std::vector<Expr>& idx) {
    Expr x = at(coord, idx);
    return unary(ExprOp::Not, x < f64(0) || x > f64(in1));
  });
  // base: the neighbour at or below x at distance ratio in (0, 1]; tap j reads base + first + j.
  auto base_of = [](const Expr& x) { return unary(ExprOp::Ceil, x) - f64(1); };
  auto tap_pos = [&](const Expr& x, const Expr& j) { return cast(DType::Int64, base_of(x)) + (j + l.first); };
  if (s.mode == Mode::Nearest) {
    t.index = compute(c.name("index" + suffix), "injective", DType::Int64, shape, [&](const std::vector<Expr>& idx) {
      Expr x = at(coord, {idx[0]});
      Expr fl = unary(ExprOp::Floor, x), frac = x - fl;
      Expr up = s.nearest_mode == "round_prefer_floor" ? frac > f64(0.5)
                : s.nearest_mode == "round_prefer_ceil" ? frac >= f64(0.5)
                : s.nearest_mode == "ceil"              ? frac > f64(0)
                                                        : int_imm(0, DType::Bool);
      return clamp_index(cast(DType::Int64, fl) + select(up, int_imm(1), int_imm(0)), in);
    });
    return t;
  }
  t.index = compute(c.name("index" + suffix), "injective", DType::Int64, shape, [&](const std::vector<Expr>& idx) {
    return clamp_index(tap_pos(at(coord, {idx[0]}), idx[1]), in);
  });
  // The unnormalized weight of tap j of output coordinate o.
  auto raw_weight = [&](const Expr& o, const Expr& j) {
    Expr x = at(coord, {o});
    Expr d = cast(F64, j + l.first) - (x - base_of(x));
    if (l.kernel_scale != 1) d = d * f64(l.kernel_scale);
    Expr ad = unary(ExprOp::Abs, d), w;
    if (s.mode == Mode::Linear) {
      w = max(f64(0), f64(1) - ad);
    } else {
      double ca = s.cubic_a;
      Expr near = ((f64(ca + 2) * ad - f64(ca + 3)) * ad) * ad + f64(1);
      Expr far = ((f64(ca) * ad - f64(5 * ca)) * ad + f64(8 * ca)) * ad - f64(4 * ca);
      w = select(ad <= f64(1), near, select(ad < f64(2), far, f64(0)));
    }
    if (!s.exclude_outside) return w;
    Expr pos = tap_pos(x, j);
    return select(pos < int_imm(0) || pos >= int_imm(in), f64(0), w);
  };
  TensorRef sum;
  if (normalizes_weights(s))
    sum = reduce(c.name("weight_sum" + suffix), "reduction", F64, {out}, Reducer::Sum, {l.taps},
                 [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) { return raw_weight(idx[0], r[0]); });
  t.weight = compute(c.name("weight" + suffix), "injective", weight_dtype, shape, [&](const std::vector<Expr>& idx) {
    Expr w = raw_weight(idx[0], idx[1]);
    if (!sum) return cast(weight_dtype, w);
    Expr total = at(sum, {idx[0]});
    return cast(weight_dtype, select(binary(ExprOp::Ne, total, f64(0)), w / total, w));
  });
  return t;
}

// The condition that output idx lies inside the crop region on every axis (null: no axis crops).
Expr crop_inside(const std::vector<AxisTensors>& axes, const std::vector<Expr>& idx) {
  Expr cond;
  for (size_t a = 0; a < axes.size(); ++a)
    if (axes[a].inside) cond = and_cond(cond, at(axes[a].inside, {idx[a]}));
  return cond;
}

// Interpolation: one reduction over the taps per resized axis, innermost axis first, as the
// reference does; the last step writes the output unless a crop or dtype conversion follows.
void lower_interpolation(LowerContext& c, const ResizeSpec& s, const std::vector<AxisTensors>& axes, DType cd) {
  DType t = c.out_dtype(0);
  std::vector<size_t> resized;
  for (size_t a = axes.size(); a-- > 0;)
    if (axes[a].index) resized.push_back(a);
  bool any_crop = std::any_of(axes.begin(), axes.end(), [](const AxisTensors& ax) { return ax.inside != nullptr; });
  bool needs_final = resized.empty() || cd != t || any_crop;
  TensorRef cur = c.input(0);
  Shape shape = s.in;
  for (size_t step = 0; step < resized.size(); ++step) {
    size_t a = resized[step];
    const AxisTensors& ax = axes[a];
    shape[a] = s.out[a];
    bool last = step + 1 == resized.size() && !needs_final;
    TensorRef src = cur;
    cur = reduce(last ? c.name() : c.name("axis" + std::to_string(a)), "injective", cd, shape, Reducer::Sum, {ax.taps},
                 [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                   std::vector<Expr> si = idx;
                   si[a] = clamp_index(at(ax.index, {idx[a], r[0]}), s.in[a]);
                   return at(ax.weight, {idx[a], r[0]}) * cast(cd, at(src, si));
                 });
  }
  if (!needs_final) {
    c.set_output(0, cur);
    return;
  }
  // Crop the extrapolated region and convert to the output dtype.
  c.set_output(0, compute(c.name(), "injective", t, s.out, [&](const std::vector<Expr>& idx) {
    Expr v = cast(cd, at(cur, idx));
    return cast(t, guarded(crop_inside(axes, idx), v, const_of(cd, s.extrapolation_value)));
  }));
}

void lower_resize(LowerContext& c) {
  ResizeSpec s = spec_of(c);
  DType t = c.out_dtype(0);
  // Integer inputs interpolate in double, like the reference.
  DType cd = is_float(t) ? compute_dtype(t) : DType::Float64;
  size_t rank = s.in.size();
  // A crop region known only at run time makes the tables of the axes it lists run-time stages.
  ResizeInputs ri = resize_inputs(c.node());
  TensorRef roi;
  if (s.coordinate_mode == "tf_crop_and_resize" && ri.roi != SIZE_MAX && c.has_input(ri.roi) &&
      num_elements(c.shape(ri.roi)) > 0 && !c.constant(ri.roi))
    roi = c.input(ri.roi);
  std::vector<int64_t> listed = listed_axes(c.node(), static_cast<int64_t>(rank));
  std::vector<int64_t> roi_slot(rank, -1);
  if (roi)
    for (size_t i = 0; i < listed.size(); ++i) roi_slot[listed[i]] = static_cast<int64_t>(i);
  std::vector<AxisTensors> axes(rank);
  for (size_t a = 0; a < rank; ++a)
    axes[a] = roi_slot[a] < 0 ? static_axis(c, s, a, cd)
                              : dynamic_axis(c, s, a, cd, roi, roi_slot[a], static_cast<int64_t>(listed.size()));

  if (s.mode != Mode::Nearest) {
    lower_interpolation(c, s, axes, cd);
    return;
  }
  // Nearest is a gather: exact for every dtype.
  const TensorRef& x = c.input(0);
  c.set_output(0, compute(c.name(), "injective", t, s.out, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> xi;
    for (size_t a = 0; a < rank; ++a)
      xi.push_back(axes[a].index ? clamp_index(at(axes[a].index, {idx[a], int_imm(0)}), s.in[a]) : idx[a]);
    return guarded(crop_inside(axes, idx), at(x, xi), const_of(t, s.extrapolation_value));
  }));
}

}  // namespace

void register_resize_lowerings(LoweringRegistry& r) {
  r.add({"Resize", "", lower_resize});
  r.add({"Upsample", "", lower_resize});
}

}  // namespace kiln::te::nn_lower
