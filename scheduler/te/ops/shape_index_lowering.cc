// Ops that select or place elements by index, as tensor expressions: Slice, Gather, GatherElements,
// GatherND, ScatterND, ScatterElements (and its deprecated alias Scatter), Compress, OneHot, TopK.
// Every data-dependent index is wrapped and clamped before it addresses a tensor.
#include <algorithm>
#include <memory>

#include "frontend/ops/axes_and_broadcast.h"
#include "scheduler/te/ops/shape_lowering_common.h"

namespace kiln::te::shape_lowering {
namespace {

// ---- Slice ------------------------------------------------------------------------------------------------

// The plan (starts clamped, steps bounded) is shape inference's; its counts are the output shape.
OpLowering slice_lowering() {
  return {"Slice", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            std::vector<SliceAxis> plan = slice_plan(c.node(), c.shape(0), int_inputs(c));
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           std::vector<Expr> src;
                           for (size_t a = 0; a < idx.size(); ++a)
                             src.push_back(int_imm(plan[a].start) + idx[a] * int_imm(plan[a].step));
                           return at(x, src);
                         }));
          }};
}

// ---- Gather, GatherElements, GatherND --------------------------------------------------------------------

OpLowering gather_lowering() {
  return {"Gather", "", [](LowerContext& c) {
            const TensorRef &x = c.input(0), &indices = c.input(1);
            int64_t axis = axis_attr(c, "axis", 0, c.rank(0));
            size_t q = indices->shape.size();
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           // out[pre, j..., post] = x[pre, indices[j...], post]
                           std::vector<Expr> src(idx.begin(), idx.begin() + axis);
                           std::vector<Expr> j(idx.begin() + axis, idx.begin() + axis + q);
                           src.push_back(wrap_and_clamp(at(indices, j), x->shape[axis]));
                           src.insert(src.end(), idx.begin() + axis + q, idx.end());
                           return at(x, src);
                         }));
          }};
}

OpLowering gather_elements_lowering() {
  return {"GatherElements", "", [](LowerContext& c) {
            const TensorRef &x = c.input(0), &indices = c.input(1);
            int64_t axis = axis_attr(c, "axis", 0, c.rank(0));
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           // Off the axis indices' extents fit inside data's, so only the axis needs care.
                           std::vector<Expr> src = idx;
                           src[axis] = wrap_and_clamp(at(indices, idx), x->shape[axis]);
                           return at(x, src);
                         }));
          }};
}

// GatherND: out[t..., s...] = x[b..., indices[t..., :], s...] where t are the index tuples' positions
// (the first batch_dims of which are shared with data) and s the coordinates inside the addressed slice.
OpLowering gather_nd_lowering() {
  return {"GatherND", "", [](LowerContext& c) {
            const TensorRef &x = c.input(0), &indices = c.input(1);
            int64_t batch_dims = c.node().attr_int("batch_dims", 0);
            int64_t q = static_cast<int64_t>(indices->shape.size()), depth = indices->shape.back();
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           std::vector<Expr> src(idx.begin(), idx.begin() + batch_dims);
                           std::vector<Expr> tuple(idx.begin(), idx.begin() + (q - 1));
                           tuple.push_back(nullptr);
                           for (int64_t k = 0; k < depth; ++k) {
                             tuple.back() = int_imm(k);
                             src.push_back(wrap_and_clamp(at(indices, tuple), x->shape[batch_dims + k]));
                           }
                           src.insert(src.end(), idx.begin() + (q - 1), idx.end());
                           return at(x, src);
                         }));
          }};
}

// ---- ScatterND, ScatterElements, Scatter ---------------------------------------------------------------

Reducer reducer_of(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::Add: return Reducer::Sum;
    case ScatterReduction::Mul: return Reducer::Prod;
    case ScatterReduction::Max: return Reducer::Max;
    case ScatterReduction::Min: return Reducer::Min;
    case ScatterReduction::None: break;
  }
  return Reducer::None;
}

// How a scatter sees its updates: `count` updates in the reference kernel's order; update u targets the
// output element idx when matches(idx, u) and then contributes value(idx, u). Both receive u as an Int64
// expression known to lie in [0, count), so their loads stay in bounds.
struct ScatterForm {
  int64_t count = 0;
  std::function<Expr(const std::vector<Expr>& idx, const Expr& u)> matches;
  std::function<Expr(const std::vector<Expr>& idx, const Expr& u)> value;
};

// Scatter as loop nests, never writing to one element twice:
//  - reduction none: the last matching update wins. A max-reduction over select(match, u, -1) finds it,
//    then a second stage picks that update or the original data;
//  - add/mul/max/min: a reduction over [data, update 0, ..., update count-1] whose non-matching updates
//    contribute the identity, which combines in the same order as the reference kernel.
TensorRef lower_scatter(LowerContext& c, const ScatterForm& f) {
  const TensorRef& data = c.input(0);
  const Shape& shape = c.out_shape(0);
  ScatterReduction mode = parse_scatter_reduction(c.node());
  if (f.count == 0) return reshaped_copy(data, shape, c.name());
  if (mode == ScatterReduction::None) {
    TensorRef last = reduce(c.name("last"), "reduction", DType::Int64, shape, Reducer::Max, {f.count},
                            [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                              return select(f.matches(idx, r[0]), r[0], int_imm(-1));
                            });
    return compute(c.name(), "injective", data->dtype, shape, [&](const std::vector<Expr>& idx) {
      Expr u = at(last, idx);
      return select(u >= int_imm(0), f.value(idx, max(u, int_imm(0))), at(data, idx));
    });
  }
  Reducer reducer = reducer_of(mode);
  return reduce_in_arith_dtype(c, "acc", "reduction", data->dtype, shape, reducer, {f.count + 1},
                               [&](DType acc, const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                                 Expr u = max(r[0] - 1, int_imm(0));  // step r > 0 is update r - 1
                                 Expr update = select(f.matches(idx, u), cast(acc, f.value(idx, u)),
                                                      reducer_identity(reducer, acc));
                                 return select(eq(r[0], int_imm(0)), cast(acc, at(data, idx)), update);
                               });
}

// ScatterND: update tuple t (flat over indices.shape[:-1]) addresses data[indices[t, :], ...]; its slice
// comes from updates[t..., s...].
OpLowering scatter_nd_lowering() {
  return {"ScatterND", "", [](LowerContext& c) {
            const TensorRef &data = c.input(0), &indices = c.input(1), &updates = c.input(2);
            Shape tuples(indices->shape.begin(), indices->shape.end() - 1);
            int64_t depth = indices->shape.back();
            ScatterForm f;
            f.count = num_elements(tuples);
            f.matches = [&](const std::vector<Expr>& idx, const Expr& u) {
              std::vector<Expr> pos = unflatten(u, tuples);
              pos.push_back(nullptr);
              Expr match;
              for (int64_t k = 0; k < depth; ++k) {
                pos.back() = int_imm(k);
                Expr e = eq(wrap_index(at(indices, pos), data->shape[k]), idx[k]);
                match = match ? match && e : e;
              }
              return match;
            };
            f.value = [&](const std::vector<Expr>& idx, const Expr& u) {
              std::vector<Expr> pos = unflatten(u, tuples);
              pos.insert(pos.end(), idx.begin() + depth, idx.end());
              return at(updates, pos);
            };
            c.set_output(0, lower_scatter(c, f));
          }};
}

// ScatterElements: indices[j] replaces the axis coordinate of its own position j. An output element can
// only be hit by the updates sharing its off-axis coordinates, so the updates scanned for it are the
// ones along the axis, in the reference kernel's (row-major) order.
OpLowering scatter_elements_lowering(const std::string& op_type) {
  return {op_type, "", [](LowerContext& c) {
            const TensorRef &data = c.input(0), &indices = c.input(1), &updates = c.input(2);
            int64_t axis = axis_attr(c, "axis", 0, c.rank(0));
            const Shape& ishape = indices->shape;
            // Positions of updates along the axis for the output element idx; off the axis, idx is
            // clamped into indices' (possibly smaller) extents and the match also requires it to fit.
            auto update_pos = [&](const std::vector<Expr>& idx, const Expr& u) {
              std::vector<Expr> pos;
              for (size_t a = 0; a < idx.size(); ++a)
                pos.push_back(static_cast<int64_t>(a) == axis ? u : min(idx[a], int_imm(ishape[a] - 1)));
              return pos;
            };
            ScatterForm f;
            f.count = num_elements(ishape) == 0 ? 0 : ishape[axis];
            f.matches = [&](const std::vector<Expr>& idx, const Expr& u) {
              Expr match = eq(wrap_index(at(indices, update_pos(idx, u)), data->shape[axis]), idx[axis]);
              for (size_t a = 0; a < idx.size(); ++a)
                if (static_cast<int64_t>(a) != axis && ishape[a] < data->shape[a])
                  match = match && idx[a] < int_imm(ishape[a]);
              return match;
            };
            f.value = [&](const std::vector<Expr>& idx, const Expr& u) { return at(updates, update_pos(idx, u)); };
            c.set_output(0, lower_scatter(c, f));
          }};
}

// ---- Compress ----------------------------------------------------------------------------------------------

// The condition is a compile-time constant (shape inference needs it for the output extent), so the
// kept positions become a constant table the loop nest reads through.
OpLowering compress_lowering() {
  return {"Compress", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            const Tensor& cond = c.require_constant(1, "condition");
            std::vector<int64_t> kept;
            for (int64_t i = 0; i < cond.size(); ++i)
              if (cond.get_int(i)) kept.push_back(i);
            int64_t n = static_cast<int64_t>(kept.size());
            TensorRef table = placeholder(c.name("kept"), DType::Int64, {n},
                                          std::make_shared<const Tensor>(Tensor::from_ints(DType::Int64, {n}, kept)));
            bool flat = !c.node().has_attr("axis");
            int64_t axis = flat ? 0 : axis_attr(c, "axis", 0, c.rank(0));
            // The table's entries are in range; the clamp says so where the bounds check of the loop
            // nest can see it (scheduler/lower/bounds_check.h), which does not read weights.
            auto entry = [&](const Expr& i, int64_t extent) {
              return max(min(at(table, {i}), int_imm(std::max<int64_t>(extent - 1, 0))), int_imm(0));
            };
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           if (flat) return at(x, unflatten(entry(idx[0], num_elements(x->shape)), x->shape));
                           std::vector<Expr> src = idx;
                           src[axis] = entry(idx[axis], x->shape[axis]);
                           return at(x, src);
                         }));
          }};
}

// ---- OneHot ------------------------------------------------------------------------------------------------

// out[pre, d, post] = values[1] if indices[pre, post] (truncated, negatives wrapped) == d else values[0];
// an index outside [-depth, depth) matches no d and stays "off".
OpLowering onehot_lowering() {
  return {"OneHot", "", [](LowerContext& c) {
            const TensorRef &indices = c.input(0), &values = c.input(2);
            int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", -1), c.rank(0) + 1);
            int64_t depth = c.out_shape(0)[axis];
            Expr off = load_at_flat(values, 0), on = load_at_flat(values, 1);
            c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           std::vector<Expr> pos = idx;
                           pos.erase(pos.begin() + axis);
                           Expr k = wrap_index(cast(DType::Int64, at(indices, pos)), depth);
                           return select(eq(k, idx[axis]), on, off);
                         }));
          }};
}

// ---- TopK ----------------------------------------------------------------------------------------------

// TopK sorts each row: not a loop nest, so it stays a runtime kernel.
OpLowering topk_lowering() {
  return {"TopK", "", [](LowerContext& c) {
            std::vector<TensorRef> ins;
            for (size_t i = 0; i < c.num_inputs(); ++i)
              if (c.has_input(i)) ins.push_back(c.input(i));
            for (size_t o = 0; o < 2; ++o)
              if (c.has_output(o))
                c.set_output(o, extern_stage(c.name(o == 0 ? "values" : "indices"), c.node(), ins, static_cast<int>(o),
                                             c.out_dtype(o), c.out_shape(o)));
          }};
}

}  // namespace

void register_shape_index_lowerings(LoweringRegistry& r) {
  r.add(slice_lowering());
  r.add(gather_lowering());
  r.add(gather_elements_lowering());
  r.add(gather_nd_lowering());
  r.add(scatter_nd_lowering());
  r.add(scatter_elements_lowering("ScatterElements"));
  r.add(scatter_elements_lowering("Scatter"));
  r.add(compress_lowering());
  r.add(onehot_lowering());
  r.add(topk_lowering());
}

}  // namespace kiln::te::shape_lowering
