// Resize and its deprecated predecessor Upsample: shape inference and the reference kernel.
//
// The geometry (attributes, source coordinates, per-axis tables of (index, weight) taps) lives in
// resize_geometry.h, shared with the TE lowering. Here nearest mode gathers through the tables, and
// linear and cubic apply them one axis at a time.
#include <algorithm>
#include <cmath>

#include "frontend/ops/nn_common.h"
#include "frontend/ops/resize_geometry.h"

namespace kiln::nn {
namespace {

Tensor resize_eval(const ResizeSpec& s, const Tensor& x) {
  size_t r = s.in.size();
  std::vector<AxisTable> tables;
  for (size_t a = 0; a < r; ++a) tables.push_back(axis_table(s, a));
  Tensor y(x.dtype(), s.out);
  bool crop = s.coordinate_mode == "tf_crop_and_resize";
  if (s.mode == ResizeMode::Nearest) {
    // A gather: exact for every dtype, integers included.
    std::vector<int64_t> in_strides = strides_of(s.in), o(r, 0);
    for (int64_t i = 0; i < y.size(); ++i, next_index(o, s.out)) {
      int64_t src = 0;
      bool outside = false;
      for (size_t a = 0; a < r; ++a) {
        src += tables[a].index[o[a]] * in_strides[a];
        outside |= tables[a].inside[o[a]] == 0;
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
        for (int64_t j = 0; j < t.layout.taps; ++j) {
          double w = t.weight[o * t.layout.taps + j];
          if (w == 0) continue;
          const double* src = &cur[(p * in_extent + t.index[o * t.layout.taps + j]) * inner];
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
      for (size_t a = 0; a < r; ++a) outside |= tables[a].inside[o[a]] == 0;
    y.set_double(i, outside ? s.extrapolation_value : cur[i]);
  }
  return y;
}

OpDef resize_op(std::string name) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_supported(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    ResizeSpec s = resize_spec(c.node(), c.shape(0), [&](size_t i, ResizeOperand what) -> const Tensor* {
      // The output shape needs scales or sizes at compile time; the crop region does not change it.
      if (what == ResizeOperand::Roi || !c.has_input(i) || num_elements(c.shape(i)) == 0) return nullptr;
      return &c.require_constant(i, resize_operand_name(what));
    });
    c.set_output(0, c.dtype(0), s.out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    ResizeSpec s = resize_spec(c.node(), x.shape(), [&](size_t i, ResizeOperand) -> const Tensor* {
      return c.has_input(i) && c.input(i).size() > 0 ? &c.input(i) : nullptr;
    });
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
