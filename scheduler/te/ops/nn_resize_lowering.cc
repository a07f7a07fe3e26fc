// Resize and Upsample as tensor expressions.
//
// Resizing is separable and its geometry is static: for every output coordinate along an axis the
// input neighbours it reads and their weights depend only on attributes and the (constant) scales,
// sizes and roi. The lowering takes those per-axis tables from frontend/ops/resize_geometry.h, the
// same code the reference kernel uses, and embeds them as constant tensors; the stages then gather through the
// index tables (nearest) or reduce over the taps one resized axis at a time (linear, cubic), as the
// reference does. Table indices are clamped again where they are loaded, so a gather cannot leave
// the input whatever a table holds.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "frontend/ops/resize_geometry.h"
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

using nn::AxisTable;
using nn::ResizeMode;
using nn::ResizeOperand;
using nn::ResizeSpec;
using nn::TapLayout;

ResizeSpec spec_of(const LowerContext& c) {
  return nn::resize_spec(c.node(), c.shape(0), [&](size_t i, ResizeOperand what) -> const Tensor* {
    if (!c.has_input(i) || num_elements(c.shape(i)) == 0) return nullptr;
    // A roi known only at run time leaves the crop region at its default here; lower_resize then
    // computes the tables of the axes it lists with stages.
    if (what == ResizeOperand::Roi) return c.constant(i);
    return &c.require_constant(i, nn::resize_operand_name(what));
  });
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
  AxisTable tab = nn::axis_table(s, a);
  AxisTensors ax;
  ax.taps = tab.layout.taps;
  std::string suffix = std::to_string(a);
  Shape shape{s.out[a], tab.layout.taps};
  if (!tab.identity) ax.index = constant_table(c, "index" + suffix, DType::Int64, shape, tab.index);
  if (!tab.identity && s.mode != ResizeMode::Nearest)
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
  double width = s.output_widths[a], in1 = static_cast<double>(in - 1);
  TensorRef coord = compute(c.name("coord" + suffix), "injective", F64, {out}, [&](const std::vector<Expr>& idx) {
    Expr start = cast(F64, at(roi, {int_imm(slot)})), end = cast(F64, at(roi, {int_imm(slot + listed)}));
    Expr rel = width == 1 ? (end - start) * f64(in1) / f64(2) : cast(F64, idx[0]) * (end - start) * f64(in1) / f64(width - 1);
    return rel + start * f64(in1);
  });
  AxisTensors t;
  TapLayout l = nn::tap_layout(s, a);
  t.taps = l.taps;
  Shape shape{out, l.taps};
  t.inside = compute(c.name("inside" + suffix), "injective", DType::Bool, {out}, [&](const std::vector<Expr>& idx) {
    Expr x = at(coord, idx);
    return unary(ExprOp::Not, x < f64(0) || x > f64(in1));
  });
  // base: the neighbour at or below x at distance ratio in (0, 1]; tap j reads base + first + j.
  auto base_of = [](const Expr& x) { return unary(ExprOp::Ceil, x) - f64(1); };
  auto tap_pos = [&](const Expr& x, const Expr& j) { return cast(DType::Int64, base_of(x)) + (j + l.first); };
  if (s.mode == ResizeMode::Nearest) {
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
    if (s.mode == ResizeMode::Linear) {
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
  if (nn::normalizes_weights(s))
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
  nn::ResizeInputs ri = nn::resize_inputs(c.node());
  TensorRef roi;
  if (s.coordinate_mode == "tf_crop_and_resize" && ri.roi != SIZE_MAX && c.has_input(ri.roi) &&
      num_elements(c.shape(ri.roi)) > 0 && !c.constant(ri.roi))
    roi = c.input(ri.roi);
  std::vector<int64_t> listed = nn::resize_axes(c.node(), static_cast<int64_t>(rank));
  std::vector<int64_t> roi_slot(rank, -1);
  if (roi)
    for (size_t i = 0; i < listed.size(); ++i) roi_slot[listed[i]] = static_cast<int64_t>(i);
  std::vector<AxisTensors> axes(rank);
  for (size_t a = 0; a < rank; ++a)
    axes[a] = roi_slot[a] < 0 ? static_axis(c, s, a, cd)
                              : dynamic_axis(c, s, a, cd, roi, roi_slot[a], static_cast<int64_t>(listed.size()));

  if (s.mode != ResizeMode::Nearest) {
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
