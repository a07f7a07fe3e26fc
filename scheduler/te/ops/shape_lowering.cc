// Shape plumbing and whole-tensor data movement as tensor expressions: Shape, Size, Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Dropout, Constant, ConstantOfShape, EyeLike, Range, Expand, Tile,
// Transpose, Concat, Split. Indexing ops are in shape_index_lowering.cc, padding/layout/scan ops in
// shape_layout_lowering.cc (mirroring frontend/ops/shape_*.cc). Attributes are parsed by
// frontend/ops/shape_attributes.h, as shape inference parses them.
#include <algorithm>
#include <memory>

#include "frontend/ops/axes_and_broadcast.h"
#include "scheduler/te/ops/shape_lowering_common.h"

namespace kiln::te {
namespace {
using namespace shape_lowering;

// ---- Values known from types alone: Shape, Size, Constant -------------------------------------------------

// Shape inference folds these ops' outputs to constants, so lower_graph normally skips them; when one is
// lowered anyway its value becomes a constant placeholder, which needs no loop nest at all.
void set_constant_output(LowerContext& c, Tensor value) {
  DType t = value.dtype();
  Shape s = value.shape();
  c.set_output(0, placeholder(c.name("value"), t, std::move(s), std::make_shared<const Tensor>(std::move(value))));
}

OpLowering shape_of_lowering() {
  return {"Shape", "", [](LowerContext& c) {
            set_constant_output(c, shape_op_value(c.node(), c.shape(0)));
          }};
}

OpLowering size_lowering() {
  return {"Size", "", [](LowerContext& c) {
            set_constant_output(c, Tensor::scalar_int(DType::Int64, num_elements(c.shape(0))));
          }};
}

OpLowering constant_lowering() {
  return {"Constant", "", [](LowerContext& c) { set_constant_output(c, constant_value(c.node())); }};
}

// ---- Same elements under a new shape -----------------------------------------------------------------------

// Reshape, Flatten, Squeeze, Unsqueeze and Identity only relabel positions: the row-major order of the
// elements is unchanged, so shape inference's output shape is all they need.
OpLowering reshaping_lowering(const std::string& op_type) {
  return {op_type, "", [](LowerContext& c) {
            c.set_output(0, reshaped_copy(c.input(0), c.out_shape(0), c.name()));
          }};
}

// Dropout at inference is the identity and keeps every element (the frontend rejects random training
// mode). The mask had the data's dtype before opset 10, bool since.
OpLowering dropout_lowering() {
  return {"Dropout", "", [](LowerContext& c) {
            c.set_output(0, reshaped_copy(c.input(0), c.out_shape(0), c.name()));
            if (!c.has_output(1)) return;
            DType t = c.out_dtype(1);
            c.set_output(1, compute(c.name("mask"), "elementwise", t, c.out_shape(1),
                                    [&](const std::vector<Expr>&) { return const_of(t, 1); }));
          }};
}

// ---- Generated tensors: ConstantOfShape, EyeLike, Range -----------------------------------------------------

// An immediate holding element 0 of `v` in `v`'s dtype; integers stay exact (const_of goes through double).
Expr immediate_of(const Tensor& v) {
  if (is_float(v.dtype())) return float_imm(v.get_double(0), v.dtype());
  return int_imm(v.get_int(0), v.dtype());
}

OpLowering constant_of_shape_lowering() {
  return {"ConstantOfShape", "", [](LowerContext& c) {
            Expr fill = immediate_of(constant_of_shape_fill(c.node()));
            c.set_output(0, compute(c.name(), "elementwise", fill->dtype, c.out_shape(0),
                                    [&](const std::vector<Expr>&) { return fill; }));
          }};
}

OpLowering eyelike_lowering() {
  return {"EyeLike", "", [](LowerContext& c) {
            int64_t k = c.node().attr_int("k", 0);
            DType t = c.out_dtype(0);
            c.set_output(0, compute(c.name(), "elementwise", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           return select(eq(idx[1] - idx[0], int_imm(k)), const_of(t, 1), const_of(t, 0));
                         }));
          }};
}

// Range: out[i] = start + i * delta; the element count comes from shape inference (start, limit and
// delta are frozen constants there). Integers wrap like the reference kernel's int64 arithmetic does.
OpLowering range_lowering() {
  return {"Range", "", [](LowerContext& c) {
            DType t = c.out_dtype(0), a = arith_dtype(t);
            Expr start = cast(a, load_at_flat(c.input(0), 0)), delta = cast(a, load_at_flat(c.input(2), 0));
            c.set_output(0, compute(c.name(), "elementwise", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           return cast(t, start + cast(a, idx[0]) * delta);
                         }));
          }};
}

// ---- Index maps: Expand, Tile, Transpose ------------------------------------------------------------------

OpLowering expand_lowering() {
  return {"Expand", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            const Shape& out = c.out_shape(0);
            c.set_output(0, compute(c.name(), "broadcast", x->dtype, out, [&](const std::vector<Expr>& idx) {
                           return at(x, broadcast_indices(idx, out, x->shape));
                         }));
          }};
}

OpLowering tile_lowering() {
  return {"Tile", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           std::vector<Expr> src;
                           for (size_t a = 0; a < idx.size(); ++a) {
                             int64_t n = x->shape[a];
                             // Repeated axes wrap around the input; max() only guards the empty case.
                             src.push_back(c.out_shape(0)[a] == n ? idx[a] : floormod(idx[a], int_imm(std::max<int64_t>(n, 1))));
                           }
                           return at(x, src);
                         }));
          }};
}

OpLowering transpose_lowering() {
  return {"Transpose", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            std::vector<int64_t> perm = transpose_perm(c.node(), c.rank(0));
            c.set_output(0, compute(c.name(), "injective", x->dtype, c.out_shape(0), [&](const std::vector<Expr>& idx) {
                           // Output axis k is input axis perm[k].
                           std::vector<Expr> src(idx.size());
                           for (size_t k = 0; k < perm.size(); ++k) src[perm[k]] = idx[k];
                           return at(x, src);
                         }));
          }};
}

// ---- Concat, Split: blocks along one axis ------------------------------------------------------------------

OpLowering concat_lowering() {
  return {"Concat", "", [](LowerContext& c) {
            const Shape& out = c.out_shape(0);
            int64_t axis = normalize_axis(c.node(), c.node().required_int("axis"), static_cast<int64_t>(out.size()));
            // Inputs with an empty block along the axis contribute nothing and must not be read.
            std::vector<size_t> parts;
            for (size_t i = 0; i < c.num_inputs(); ++i)
              if (c.shape(i)[axis] > 0) parts.push_back(i);
            std::vector<int64_t> offsets;  // where each part starts along the axis
            int64_t offset = 0;
            for (size_t i : parts) {
              offsets.push_back(offset);
              offset += c.shape(i)[axis];
            }
            c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), out, [&](const std::vector<Expr>& idx) {
                           if (parts.empty()) return const_of(c.out_dtype(0), 0);  // the output is empty
                           // select(i < offsets[1], part 0, select(i < offsets[2], part 1, ... last part)):
                           // a part is only read once the position is known to lie inside it.
                           auto part = [&](size_t p) {
                             std::vector<Expr> src = idx;
                             src[axis] = idx[axis] - offsets[p];
                             return at(c.input(parts[p]), src);
                           };
                           Expr value = part(parts.size() - 1);
                           for (size_t p = parts.size() - 1; p-- > 0;)
                             value = select(idx[axis] < int_imm(offsets[p + 1]), part(p), value);
                           return value;
                         }));
          }};
}

OpLowering split_lowering() {
  return {"Split", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            int64_t axis = axis_attr(c, "axis", 0, c.rank(0));
            std::vector<int64_t> sizes = split_sizes(c.node(), x->shape[axis], int_inputs(c));
            int64_t offset = 0;
            for (size_t i = 0; i < sizes.size(); ++i) {
              if (c.has_output(i)) {
                Shape s = x->shape;
                s[axis] = sizes[i];
                c.set_output(i, compute(c.name(std::to_string(i)), "injective", x->dtype, s, [&](const std::vector<Expr>& idx) {
                               std::vector<Expr> src = idx;
                               src[axis] = idx[axis] + offset;
                               return at(x, src);
                             }));
              }
              offset += sizes[i];
            }
          }};
}

}  // namespace

void register_shape_lowerings(LoweringRegistry& r) {
  r.add(shape_of_lowering());
  r.add(size_lowering());
  r.add(constant_lowering());
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) r.add(reshaping_lowering(op));
  r.add(dropout_lowering());
  r.add(constant_of_shape_lowering());
  r.add(eyelike_lowering());
  r.add(range_lowering());
  r.add(expand_lowering());
  r.add(tile_lowering());
  r.add(transpose_lowering());
  r.add(concat_lowering());
  r.add(split_lowering());
  shape_lowering::register_shape_index_lowerings(r);
  shape_lowering::register_shape_layout_lowerings(r);
}

}  // namespace kiln::te
