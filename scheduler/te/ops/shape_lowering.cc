// Shape plumbing and whole-tensor data movement as tensor expressions: Shape, Size, Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Dropout, Constant, ConstantOfShape, EyeLike, Range, Expand, Tile,
// Transpose, Concat, Split. Indexing ops are in shape_index_lowering.cc, padding/layout/scan ops in
// shape_layout_lowering.cc (mirroring frontend/ops/shape_*.cc).
#include <algorithm>
#include <memory>

#include "frontend/ops/op_util.h"
#include "scheduler/te/ops/shape_lowering_util.h"

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
            // The extents in [start, end) (opset 15+), both wrapped once and clamped, as the frontend does.
            int64_t r = c.rank(0);
            int64_t start = c.node().attr_int("start", 0), end = c.node().attr_int("end", r);
            if (start < 0) start += r;
            if (end < 0) end += r;
            start = std::clamp<int64_t>(start, 0, r);
            end = std::clamp<int64_t>(end, start, r);
            std::vector<int64_t> dims(c.shape(0).begin() + start, c.shape(0).begin() + end);
            set_constant_output(c, Tensor::from_ints(DType::Int64, {static_cast<int64_t>(dims.size())}, dims));
          }};
}

OpLowering size_lowering() {
  return {"Size", "", [](LowerContext& c) {
            set_constant_output(c, Tensor::scalar_int(DType::Int64, num_elements(c.shape(0))));
          }};
}

Tensor constant_attr_value(const LowerContext& c) {
  const Node& n = c.node();
  if (const Tensor* t = n.attr_tensor("value")) return *t;
  if (n.has_attr("value_float")) return Tensor::scalar_double(DType::Float32, n.attr_float("value_float", 0));
  if (n.has_attr("value_int")) return Tensor::scalar_int(DType::Int64, n.attr_int("value_int", 0));
  if (n.has_attr("value_floats")) {
    auto v = n.attr_floats("value_floats");
    return Tensor::from_doubles(DType::Float32, {static_cast<int64_t>(v.size())}, v);
  }
  if (n.has_attr("value_ints")) {
    auto v = n.attr_ints("value_ints");
    return Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v);
  }
  c.unsupported("only tensor, float and int Constant values are supported");
}

OpLowering constant_lowering() {
  return {"Constant", "", [](LowerContext& c) { set_constant_output(c, constant_attr_value(c)); }};
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
            const Tensor* v = c.node().attr_tensor("value");
            Expr fill = v ? immediate_of(*v) : float_imm(0.0, DType::Float32);
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

std::vector<int64_t> transpose_perm(const LowerContext& c) {
  int64_t rank = c.rank(0);
  if (!c.node().has_attr("perm")) {
    std::vector<int64_t> perm;
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  return normalize_axes(c.node(), c.node().attr_ints("perm"), rank);
}

OpLowering transpose_lowering() {
  return {"Transpose", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            std::vector<int64_t> perm = transpose_perm(c);
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

// Split's chunk sizes, as the frontend computes them: given (attribute before opset 13, input since),
// num_outputs (18+, the last chunk smaller), or equal parts.
std::vector<int64_t> split_sizes(const LowerContext& c, int64_t extent) {
  const Node& n = c.node();
  int64_t outputs = static_cast<int64_t>(n.outputs.size());
  std::vector<int64_t> sizes;
  if (c.opset() < 13) sizes = n.attr_ints("split");
  else if (auto given = optional_ints(c, 1, "split")) sizes = *given;
  if (!sizes.empty()) return sizes;
  if (c.opset() >= 18 && n.has_attr("num_outputs")) {
    int64_t parts = n.attr_int("num_outputs", 0);
    int64_t chunk = (extent + parts - 1) / parts;
    sizes.assign(parts, chunk);
    sizes.back() = extent - chunk * (parts - 1);
    return sizes;
  }
  return std::vector<int64_t>(outputs, extent / outputs);
}

OpLowering split_lowering() {
  return {"Split", "", [](LowerContext& c) {
            const TensorRef& x = c.input(0);
            int64_t axis = axis_attr(c, "axis", 0, c.rank(0));
            std::vector<int64_t> sizes = split_sizes(c, x->shape[axis]);
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
