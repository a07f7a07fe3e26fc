// Ops that rearrange elements by position, as tensor expressions: Pad, CenterCropPad, DepthToSpace,
// SpaceToDepth, Trilu, ReverseSequence, and the scans CumSum and CumProd.
#include <algorithm>

#include "frontend/ops/axes_and_broadcast.h"
#include "scheduler/te/ops/shape_lowering_common.h"

namespace kiln::te::shape_lowering {
namespace {

// ---- Pad, CenterCropPad --------------------------------------------------------------------------------

enum class PadMode { Constant, Reflect, Edge, Wrap };

PadMode pad_mode(const LowerContext& c) {
  std::string m = c.node().attr_string("mode", "constant");
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "edge") return PadMode::Edge;
  if (m == "wrap") return PadMode::Wrap;
  c.fail("unknown pad mode '" + m + "'");
}

// Pad's per-axis begin pads (negative ones crop): attribute `pads` before opset 11, constant input 1
// after, restricted to the constant `axes` input from opset 18.
std::vector<int64_t> pad_begins(const LowerContext& c) {
  int64_t rank = c.rank(0);
  std::vector<int64_t> pads, axes;
  if (c.opset() < 11) {
    pads = c.node().required_ints("pads");
  } else {
    pads = required_ints(c, 1, "pads");
    if (c.opset() >= 18) axes = optional_ints(c, 3, "axes").value_or(std::vector<int64_t>{});
  }
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  std::vector<int64_t> begin(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) begin[normalize_axis(c.node(), axes[i], rank)] = pads[i];
  return begin;
}

// Where input coordinate i (the output coordinate minus the begin pad) reads from along an axis of
// `extent` in the modes that never read the fill; the result always lies in [0, extent).
Expr pad_source(PadMode mode, const Expr& i, int64_t extent) {
  switch (mode) {
    case PadMode::Edge: return min(max(i, int_imm(0)), int_imm(extent - 1));
    case PadMode::Wrap: return floormod(i, int_imm(extent));
    case PadMode::Reflect: {
      if (extent == 1) return int_imm(0);
      // Reflection without repeating the edge is periodic with period 2 * (extent - 1).
      int64_t period = 2 * (extent - 1);
      Expr p = floormod(i, int_imm(period));
      return select(p < int_imm(extent), p, int_imm(period) - p);
    }
    case PadMode::Constant: break;
  }
  return i;
}

// The constant a Pad fills with, in the data's dtype: attribute `value` before opset 11, the optional
// one-element input 2 after (read at run time), zero otherwise.
Expr pad_fill(const LowerContext& c, DType t) {
  if (c.opset() < 11) return const_of(t, c.node().attr_float("value", 0.0));
  if (c.has_input(2)) return load_at_flat(c.input(2), 0);
  return const_of(t, 0);
}

// True when every coordinate in `src` lies inside `shape` (the constant-padding guard).
Expr inside(const std::vector<Expr>& src, const Shape& shape) {
  Expr ok;
  for (size_t a = 0; a < src.size(); ++a) {
    Expr e = src[a] >= int_imm(0) && src[a] < int_imm(shape[a]);
    ok = ok ? ok && e : e;
  }
  return ok;
}

// A stage reading x at `source`(idx) when every coordinate is inside x and `fill` elsewhere.
TensorRef guarded_gather(const LowerContext& c, const TensorRef& x, const Expr& fill,
                         const std::function<std::vector<Expr>(const std::vector<Expr>&)>& source) {
  return compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    std::vector<Expr> src = source(idx);
    if (src.empty()) return at(x, src);  // a scalar has nothing to pad
    return select(inside(src, x->shape), at(x, src), fill);
  });
}

OpLowering pad_lowering() {
  return {"Pad", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            PadMode mode = pad_mode(c);
            std::vector<int64_t> begin = pad_begins(c);
            auto shifted = [&](const std::vector<Expr>& idx) {
              std::vector<Expr> src;
              for (size_t a = 0; a < idx.size(); ++a) src.push_back(idx[a] - begin[a]);
              return src;
            };
            // An empty input can only be padded with the constant (shape inference checks), so the
            // other modes may assume non-empty axes.
            if (mode == PadMode::Constant || num_elements(x->shape) == 0) {
              c.set_output(0, guarded_gather(c, x, pad_fill(c, x->dtype), shifted));
              return;
            }
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           std::vector<Expr> src = shifted(idx);
                           for (size_t a = 0; a < src.size(); ++a) src[a] = pad_source(mode, src[a], x->shape[a]);
                           return at(x, src);
                         }));
          }};
}

// CenterCropPad: each axis is cropped or zero-padded symmetrically to the extent shape inference gives
// it; output o reads input o + shift (shift > 0 crops, shift < 0 pads, the odd element goes at the end).
OpLowering center_crop_pad_lowering() {
  return {"CenterCropPad", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            const Shape& out = c.out_shape(0);
            std::vector<int64_t> shift;
            for (size_t a = 0; a < out.size(); ++a) {
              int64_t diff = x->shape[a] - out[a];
              shift.push_back(diff >= 0 ? diff / 2 : -((-diff) / 2));
            }
            c.set_output(0, guarded_gather(c, x, const_of(x->dtype, 0), [&](const std::vector<Expr>& idx) {
                           std::vector<Expr> src;
                           for (size_t a = 0; a < idx.size(); ++a) src.push_back(idx[a] + shift[a]);
                           return src;
                         }));
          }};
}

// ---- DepthToSpace, SpaceToDepth ---------------------------------------------------------------------

// Both ops pair an element (n, c, h, w) of the deep tensor with (n, c', h*b + i, w*b + j) of the wide
// one. DCR (the default) orders the deep channel as (i, j, c'), CRD as (c', i, j); SpaceToDepth is DCR.
OpLowering depth_to_space_lowering() {
  return {"DepthToSpace", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            int64_t b = c.node().required_int("blocksize");
            bool crd = c.node().attr_string("mode", "DCR") == "CRD";
            int64_t wide_c = c.out_shape(0)[1];
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           Expr bb = int_imm(b);
                           Expr h = floordiv(idx[2], bb), i = floormod(idx[2], bb);
                           Expr w = floordiv(idx[3], bb), j = floormod(idx[3], bb);
                           Expr ch = crd ? (idx[1] * b + i) * b + j : (i * b + j) * wide_c + idx[1];
                           return at(x, {idx[0], ch, h, w});
                         }));
          }};
}

OpLowering space_to_depth_lowering() {
  return {"SpaceToDepth", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            int64_t b = c.node().required_int("blocksize");
            int64_t wide_c = x->shape[1];
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           Expr ch = idx[1];
                           Expr i = floordiv(ch, int_imm(b * wide_c));
                           Expr j = floormod(floordiv(ch, int_imm(wide_c)), int_imm(b));
                           Expr cw = floormod(ch, int_imm(wide_c));
                           return at(x, {idx[0], cw, idx[2] * b + i, idx[3] * b + j});
                         }));
          }};
}

// ---- Trilu, ReverseSequence ----------------------------------------------------------------------------

// Upper keeps the diagonal k and above (col - row >= k), lower keeps it and below; k may be a runtime input.
OpLowering trilu_lowering() {
  return {"Trilu", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            bool upper = c.node().attr_int("upper", 1) != 0;
            Expr k = c.has_input(1) ? cast(DType::Int64, load_at_flat(c.input(1), 0)) : int_imm(0);
            size_t r = x->shape.size();
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           Expr diag = idx[r - 1] - idx[r - 2];
                           Expr keep = upper ? diag >= k : diag <= k;
                           return select(keep, at(x, idx), const_of(x->dtype, 0));
                         }));
          }};
}

// The first sequence_lens[b] steps of each batch entry are reversed, the rest copied. The length is a
// runtime value, clamped into [0, steps] so the reversed step always lies inside the time axis.
OpLowering reverse_sequence_lowering() {
  return {"ReverseSequence", "", [](LowerContext& c) {
            const TensorRef &x = c.input(0), &lens = c.input(1);
            int64_t batch_axis = c.node().attr_int("batch_axis", 1), time_axis = c.node().attr_int("time_axis", 0);
            int64_t steps = x->shape[time_axis];
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           Expr len = cast(DType::Int64, at(lens, {idx[batch_axis]}));
                           len = min(max(len, int_imm(0)), int_imm(steps));
                           Expr t = idx[time_axis];
                           std::vector<Expr> src = idx;
                           src[time_axis] = select(t < len, len - 1 - t, t);
                           return at(x, src);
                         }));
          }};
}

// ---- CumSum, CumProd ---------------------------------------------------------------------------------

// A running sum or product along an axis as a reduction over the axis whose steps outside the prefix
// (or suffix, with `reverse`; `exclusive` leaves the current element out) contribute the identity.
// The axis is an input: when it is not a compile-time constant, the reduction runs over the longest
// axis and selects, per candidate axis, the terms that apply.
OpLowering scan_lowering(const std::string& op_type, Reducer reducer) {
  return {op_type, "", [reducer](LowerContext& c) {
            const TensorRef& x = c.input(0);
            const Shape& s = x->shape;
            int64_t rank = c.rank(0);
            bool exclusive = c.node().attr_int("exclusive", 0) != 0;
            bool reverse = c.node().attr_int("reverse", 0) != 0;
            std::vector<int64_t> candidates;
            if (const Tensor* axis = c.constant(1)) {
              candidates.push_back(normalize_axis(c.node(), axis->get_int(0), rank));
            } else {
              for (int64_t a = 0; a < rank; ++a) candidates.push_back(a);
            }
            int64_t extent = 0;
            for (int64_t a : candidates) extent = std::max(extent, s[a]);
            Expr axis_value = candidates.size() == 1 ? nullptr : wrap_index(load_at_flat(c.input(1), 0), rank);
            c.set_output(0, reduce_in_arith_dtype(
                                c, "acc", "reduction", x->dtype, s, reducer, {extent},
                                [&](DType acc, const std::vector<Expr>& idx, const std::vector<Expr>& ridx) {
                                  const Expr& r = ridx[0];
                                  Expr identity = reducer_identity(reducer, acc);
                                  Expr body = identity;
                                  for (int64_t a : candidates) {
                                    const Expr& i = idx[a];
                                    Expr in_scan = reverse ? (exclusive ? r > i : r >= i) : (exclusive ? r < i : r <= i);
                                    if (s[a] < extent) in_scan = r < int_imm(s[a]) && in_scan;
                                    std::vector<Expr> src = idx;
                                    src[a] = min(r, int_imm(std::max<int64_t>(s[a] - 1, 0)));
                                    Expr term = select(in_scan, cast(acc, at(x, src)), identity);
                                    body = axis_value ? select(eq(axis_value, int_imm(a)), term, body) : term;
                                  }
                                  return body;
                                }));
          }};
}

}  // namespace

void register_shape_layout_lowerings(LoweringRegistry& r) {
  r.add(pad_lowering());
  r.add(center_crop_pad_lowering());
  r.add(depth_to_space_lowering());
  r.add(space_to_depth_lowering());
  r.add(trilu_lowering());
  r.add(reverse_sequence_lowering());
  r.add(scan_lowering("CumSum", Reducer::Sum));
  r.add(scan_lowering("CumProd", Reducer::Prod));
}

}  // namespace kiln::te::shape_lowering
