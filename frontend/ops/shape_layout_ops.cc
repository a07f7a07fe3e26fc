// Ops that rearrange elements by position: Pad, CenterCropPad, DepthToSpace, SpaceToDepth, Trilu,
// ReverseSequence, and the scans CumSum and CumProd.
#include <algorithm>

#include "frontend/ops/shape_common.h"

namespace kiln::shape_family {
namespace {

// ---- Pad, CenterCropPad --------------------------------------------------------------------------------

enum class PadMode { Constant, Reflect, Edge, Wrap };

PadMode pad_mode(const Node& n, int64_t opset) {
  std::string m = n.attr_string("mode", "constant");
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "edge") return PadMode::Edge;
  if (m == "wrap" && opset >= 19) return PadMode::Wrap;
  fail(n, "unknown pad mode '" + m + "'");
}

// Where output coordinate `i - begin` of a padded axis reads the input, or -1 for the constant.
int64_t pad_source(PadMode mode, int64_t i, int64_t extent) {
  if (i >= 0 && i < extent) return i;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return i < 0 ? 0 : extent - 1;
    case PadMode::Wrap: return ((i % extent) + extent) % extent;
    case PadMode::Reflect: {
      if (extent == 1) return 0;
      // Reflection without repeating the edge is periodic with period 2 * (extent - 1).
      int64_t period = 2 * (extent - 1);
      int64_t p = ((i % period) + period) % period;
      return p < extent ? p : period - p;
    }
  }
  return -1;
}

// Per-axis begin and end pads over all axes (negative ones crop).
struct PadPlan {
  PadMode mode = PadMode::Constant;
  std::vector<int64_t> begin, end;
  Shape out;
};

// Pad's parameters: attributes `pads`, `mode`, `value` before opset 11; inputs pads, constant_value and
// (18+) axes after.
template <typename Ctx>
PadPlan pad_plan(const Ctx& c, const Shape& in) {
  const Node& n = c.node();
  int64_t rank = static_cast<int64_t>(in.size());
  PadPlan p;
  p.mode = pad_mode(n, c.opset());
  std::vector<int64_t> pads, axes;
  if (c.opset() < 11) {
    pads = n.required_ints("pads");
  } else {
    auto given = int_input_values(c, 1, "pads");
    if (!given) fail(n, "missing required input 1 ('pads')");
    pads = *given;
    if (c.opset() >= 18) axes = int_input_values(c, 3, "axes").value_or(std::vector<int64_t>{});
  }
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  if (pads.size() != 2 * axes.size())
    fail(n, "pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(axes.size()) + " axes");
  p.begin.assign(rank, 0);
  p.end.assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normalize_axis(n, axes[i], rank);
    p.begin[a] = pads[i];
    p.end[a] = pads[i + axes.size()];
  }
  for (int64_t a = 0; a < rank; ++a) {
    int64_t extent = in[a] + p.begin[a] + p.end[a];
    if (extent < 0) fail(n, "pads crop axis " + std::to_string(a) + " below zero");
    if (in[a] == 0 && extent > 0 && p.mode != PadMode::Constant) fail(n, "cannot pad an empty axis except with a constant");
    p.out.push_back(extent);
  }
  return p;
}

// The constant a Pad fills with, in the data's dtype (zero when not given).
Tensor pad_fill(const EvalContext& c, DType dtype) {
  Tensor fill(dtype, {});
  if (c.opset() < 11) {
    fill.set_double(0, c.node().attr_float("value", 0.0));
  } else if (c.has_input(2)) {
    const Tensor& v = c.input(2);
    if (v.dtype() != dtype) fail(c.node(), "constant_value dtype differs from data dtype");
    if (v.size() != 1) fail(c.node(), "constant_value must have one element");
    copy_element(fill, 0, v, 0);
  }
  return fill;
}

// A gather map for an output whose axis a reads input coordinate source[a][o] (-1: fill).
std::vector<int64_t> axiswise_map(const Shape& in, const Shape& out, const std::vector<std::vector<int64_t>>& source) {
  std::vector<int64_t> strides = strides_of(in);
  std::vector<int64_t> map(num_elements(out));
  for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t flat) {
    int64_t src = 0;
    for (size_t a = 0; a < idx.size(); ++a) {
      int64_t s = source[a][idx[a]];
      if (s < 0) {
        src = -1;
        break;
      }
      src += s * strides[a];
    }
    map[flat] = src;
  });
  return map;
}

OpDef pad_op() {
  OpDef d;
  d.op_type = "Pad";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    if (c.opset() >= 11 && c.has_input(2) && c.dtype(2) != c.dtype(0))
      c.fail("constant_value dtype differs from data dtype");
    c.set_output(0, c.dtype(0), pad_plan(c, c.shape(0)).out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    PadPlan p = pad_plan(c, x.shape());
    std::vector<std::vector<int64_t>> source(x.shape().size());
    for (size_t a = 0; a < source.size(); ++a)
      for (int64_t o = 0; o < p.out[a]; ++o) source[a].push_back(pad_source(p.mode, o - p.begin[a], x.shape()[a]));
    Tensor fill = pad_fill(c, x.dtype());
    c.set_output(0, gather_by_map(x, p.out, axiswise_map(x.shape(), p.out, source), &fill));
  };
  return d;
}

// CenterCropPad: each listed axis is cropped or zero-padded symmetrically to its target extent (the
// extra element of an odd difference goes at the end).
template <typename Ctx>
std::vector<std::vector<int64_t>> center_crop_pad_sources(const Ctx& c, const Shape& in, Shape& out) {
  const Node& n = c.node();
  int64_t rank = static_cast<int64_t>(in.size());
  auto target = int_input_values(c, 1, "shape");
  if (!target) fail(n, "missing required input 1 ('shape')");
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  if (target->size() != axes.size())
    fail(n, "shape has " + std::to_string(target->size()) + " entries for " + std::to_string(axes.size()) + " axes");
  out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    if ((*target)[i] < 0) fail(n, "negative target extent " + std::to_string((*target)[i]));
    out[normalize_axis(n, axes[i], rank)] = (*target)[i];
  }
  std::vector<std::vector<int64_t>> source(in.size());
  for (int64_t a = 0; a < rank; ++a) {
    // Output o reads input o + shift: shift > 0 crops, shift < 0 pads.
    int64_t diff = in[a] - out[a];
    int64_t shift = diff >= 0 ? diff / 2 : -((-diff) / 2);
    for (int64_t o = 0; o < out[a]; ++o) {
      int64_t i = o + shift;
      source[a].push_back(i >= 0 && i < in[a] ? i : -1);
    }
  }
  return source;
}

OpDef center_crop_pad_op() {
  OpDef d;
  d.op_type = "CenterCropPad";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input_data");
    Shape out;
    center_crop_pad_sources(c, c.shape(0), out);
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape out;
    auto source = center_crop_pad_sources(c, x.shape(), out);
    c.set_output(0, gather_by_map(x, out, axiswise_map(x.shape(), out, source)));
  };
  return d;
}

// ---- DepthToSpace, SpaceToDepth ---------------------------------------------------------------------

int64_t blocksize(const Node& n) {
  int64_t b = n.required_int("blocksize");
  if (b < 1) fail(n, "blocksize must be positive, got " + std::to_string(b));
  return b;
}

Shape depth_to_space_shape(const Node& n, const Shape& in) {
  int64_t b = blocksize(n);
  if (in.size() != 4) fail(n, "input must be 4-D (NCHW), got " + shape_str(in));
  if (in[1] % (b * b) != 0) fail(n, "channels " + std::to_string(in[1]) + " are not divisible by blocksize^2");
  return {in[0], in[1] / (b * b), in[2] * b, in[3] * b};
}

Shape space_to_depth_shape(const Node& n, const Shape& in) {
  int64_t b = blocksize(n);
  if (in.size() != 4) fail(n, "input must be 4-D (NCHW), got " + shape_str(in));
  if (in[2] % b != 0 || in[3] % b != 0) fail(n, "height and width must be divisible by blocksize");
  return {in[0], in[1] * b * b, in[2] / b, in[3] / b};
}

// Both ops pair an element (n, c, h, w) of the deep tensor with (n, c', h*b + i, w*b + j) of the wide
// one. DCR (the default) orders the deep channel as (i, j, c'), CRD as (c', i, j).
std::vector<int64_t> depth_space_map(const Shape& deep, const Shape& wide, int64_t b, bool crd, bool to_space) {
  int64_t c_wide = wide[1];
  const Shape& out = to_space ? wide : deep;
  const Shape& in = to_space ? deep : wide;
  std::vector<int64_t> in_strides = strides_of(in);
  std::vector<int64_t> map(num_elements(out));
  for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t flat) {
    int64_t n = idx[0], ch, h, w, i, j, cw;
    if (to_space) {
      cw = idx[1], h = idx[2] / b, i = idx[2] % b, w = idx[3] / b, j = idx[3] % b;
      ch = crd ? (cw * b + i) * b + j : (i * b + j) * c_wide + cw;
      map[flat] = n * in_strides[0] + ch * in_strides[1] + h * in_strides[2] + w * in_strides[3];
    } else {
      ch = idx[1], h = idx[2], w = idx[3];
      i = ch / (b * c_wide), j = (ch / c_wide) % b, cw = ch % c_wide;  // SpaceToDepth is always DCR
      map[flat] = n * in_strides[0] + cw * in_strides[1] + (h * b + i) * in_strides[2] + (w * b + j) * in_strides[3];
    }
  });
  return map;
}

bool depth_to_space_crd(const Node& n) {
  std::string mode = n.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") fail(n, "unknown mode '" + mode + "'");
  return mode == "CRD";
}

OpDef depth_to_space_op() {
  OpDef d;
  d.op_type = "DepthToSpace";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    depth_to_space_crd(c.node());
    c.set_output(0, c.dtype(0), depth_to_space_shape(c.node(), c.shape(0)));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape out = depth_to_space_shape(c.node(), x.shape());
    auto map = depth_space_map(x.shape(), out, blocksize(c.node()), depth_to_space_crd(c.node()), true);
    c.set_output(0, gather_by_map(x, out, map));
  };
  return d;
}

OpDef space_to_depth_op() {
  OpDef d;
  d.op_type = "SpaceToDepth";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.set_output(0, c.dtype(0), space_to_depth_shape(c.node(), c.shape(0)));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape out = space_to_depth_shape(c.node(), x.shape());
    c.set_output(0, gather_by_map(x, out, depth_space_map(out, x.shape(), blocksize(c.node()), false, false)));
  };
  return d;
}

// ---- Trilu, ReverseSequence ----------------------------------------------------------------------------

OpDef trilu_op() {
  OpDef d;
  d.op_type = "Trilu";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    if (c.rank(0) < 2) c.fail("input must have rank >= 2, got " + shape_str(c.shape(0)));
    if (c.has_input(1)) {
      require_integer_input(c, 1, "k");
      if (num_elements(c.shape(1)) != 1) c.fail("k must have one element");
    }
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t k = c.has_input(1) ? c.input(1).get_int(0) : 0;
    bool upper = c.node().attr_int("upper", 1) != 0;
    int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
    std::vector<int64_t> map(x.size());
    for (int64_t e = 0; e < x.size(); ++e) {
      int64_t col = e % cols, row = (e / cols) % rows;
      // Upper keeps the diagonal k and above (col - row >= k); lower keeps it and below.
      bool keep = upper ? col - row >= k : col - row <= k;
      map[e] = keep ? e : -1;
    }
    c.set_output(0, gather_by_map(x, x.shape(), map));
  };
  return d;
}

void reverse_sequence_axes(const Node& n, int64_t rank, int64_t& batch_axis, int64_t& time_axis) {
  if (rank < 2) fail(n, "input must have rank >= 2");
  batch_axis = n.attr_int("batch_axis", 1);
  time_axis = n.attr_int("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis)
    fail(n, "batch_axis and time_axis must be 0 and 1 in some order");
}

OpDef reverse_sequence_op() {
  OpDef d;
  d.op_type = "ReverseSequence";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.require_input(1, "sequence_lens");
    require_integer_input(c, 1, "sequence_lens");
    int64_t batch_axis, time_axis;
    reverse_sequence_axes(c.node(), c.rank(0), batch_axis, time_axis);
    if (c.shape(1) != Shape{c.shape(0)[batch_axis]})
      c.fail("sequence_lens has shape " + shape_str(c.shape(1)) + ", expected one entry per batch");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &lens = c.input(1);
    int64_t batch_axis, time_axis;
    reverse_sequence_axes(c.node(), x.rank(), batch_axis, time_axis);
    int64_t steps = x.shape()[time_axis];
    for (int64_t b = 0; b < lens.size(); ++b)
      if (lens.get_int(b) < 0 || lens.get_int(b) > steps)
        fail(c.node(), "sequence length " + std::to_string(lens.get_int(b)) + " is out of range");
    std::vector<int64_t> strides = strides_of(x.shape());
    std::vector<int64_t> map(x.size());
    for_each_index(x.shape(), [&](const std::vector<int64_t>& idx, int64_t flat) {
      int64_t t = idx[time_axis], len = lens.get_int(idx[batch_axis]);
      map[flat] = t < len ? flat + (len - 1 - 2 * t) * strides[time_axis] : flat;
    });
    c.set_output(0, gather_by_map(x, x.shape(), map));
  };
  return d;
}

// ---- CumSum, CumProd ---------------------------------------------------------------------------------

int64_t scan_axis(const Node& n, const Tensor& axis, int64_t rank) {
  if (axis.size() != 1) fail(n, "axis must have one element");
  return normalize_axis(n, axis.get_int(0), rank);
}

// A running sum or product along an axis; `exclusive` leaves the current element out, `reverse` runs
// from the end. Floats accumulate in double, integers in wrapping int64.
OpDef scan_op(std::string name, bool product) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "x");
    c.require_input(1, "axis");
    require_integer_input(c, 1, "axis");
    if (c.dtype(0) == DType::Bool) c.unsupported("dtype bool is not supported");
    if (c.rank(0) == 0) c.fail("input must have rank >= 1");
    if (const Tensor* axis = c.constant(1)) scan_axis(c.node(), *axis, c.rank(0));
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [product](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t axis = scan_axis(c.node(), c.input(1), x.rank());
    bool exclusive = c.node().attr_int("exclusive", 0) != 0;
    bool reverse = c.node().attr_int("reverse", 0) != 0;
    const Shape& s = x.shape();
    int64_t outer = extent_product(s, 0, axis), extent = s[axis], inner = extent_product(s, axis + 1, s.size());
    Tensor y(x.dtype(), s);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double facc = product ? 1.0 : 0.0;
        uint64_t iacc = product ? 1 : 0;
        for (int64_t step = 0; step < extent; ++step) {
          int64_t e = reverse ? extent - 1 - step : step;
          int64_t at = (o * extent + e) * inner + i;
          double fv = x.is_float_dtype() ? x.get_double(at) : 0.0;
          uint64_t iv = x.is_float_dtype() ? 0 : static_cast<uint64_t>(x.get_int(at));
          if (!exclusive) {
            facc = product ? facc * fv : facc + fv;
            iacc = product ? iacc * iv : iacc + iv;
          }
          if (x.is_float_dtype()) y.set_double(at, facc);
          else y.set_int(at, static_cast<int64_t>(iacc));
          if (exclusive) {
            facc = product ? facc * fv : facc + fv;
            iacc = product ? iacc * iv : iacc + iv;
          }
        }
      }
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;
  return d;
}

}  // namespace

void register_shape_layout_ops(OpRegistry& r) {
  r.add(pad_op());
  r.add(center_crop_pad_op());
  r.add(depth_to_space_op());
  r.add(space_to_depth_op());
  r.add(trilu_op());
  r.add(reverse_sequence_op());
  r.add(scan_op("CumSum", false));
  r.add(scan_op("CumProd", true));
}

}  // namespace kiln::shape_family
