// Ops that select or place elements by index: Slice, Gather, GatherElements, GatherND, ScatterND,
// ScatterElements (and its deprecated alias Scatter), Compress, OneHot, TopK.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "frontend/ops/shape_attributes.h"
#include "frontend/ops/shape_common.h"

namespace kiln::shape_family {
namespace {

// ---- Slice ------------------------------------------------------------------------------------------------

Shape slice_shape(const std::vector<SliceAxis>& plan) {
  Shape out;
  for (const SliceAxis& s : plan) out.push_back(s.count);
  return out;
}

OpDef slice_op() {
  OpDef d;
  d.op_type = "Slice";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    if (c.opset() >= 10) {
      c.require_input(1, "starts");
      c.require_input(2, "ends");
    }
    c.set_output(0, c.dtype(0), slice_shape(slice_plan(c.node(), c.shape(0), int_inputs(c))));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    std::vector<SliceAxis> plan = slice_plan(c.node(), x.shape(), int_inputs(c));
    Shape out = slice_shape(plan);
    std::vector<int64_t> strides = strides_of(x.shape());
    std::vector<int64_t> map(num_elements(out));
    for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t flat) {
      int64_t src = 0;
      for (size_t a = 0; a < idx.size(); ++a) src += (plan[a].start + idx[a] * plan[a].step) * strides[a];
      map[flat] = src;
    });
    c.set_output(0, gather_by_map(x, out, map));
  };
  return d;
}

// ---- Gather, GatherElements, GatherND --------------------------------------------------------------------

OpDef gather_op() {
  OpDef d;
  d.op_type = "Gather";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    c.require_input(1, "indices");
    require_integer_input(c, 1, "indices");
    const Shape& data = c.shape(0);
    if (data.empty()) c.fail("data must have rank >= 1");
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), c.rank(0));
    // Constant indices are checked now, as the reference does when it runs: compiled code clamps
    // every index to stay in bounds, which would turn a bad model into a silent wrong answer.
    if (const Tensor* idx = c.constant(1))
      for (int64_t j = 0; j < idx->size(); ++j) wrap_index(c.node(), idx->get_int(j), data[axis], "index");
    Shape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), c.shape(1).begin(), c.shape(1).end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &indices = c.input(1);
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), x.rank());
    const Shape& data = x.shape();
    Shape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), indices.shape().begin(), indices.shape().end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    Tensor y(x.dtype(), out);
    int64_t outer = extent_product(data, 0, axis), extent = data[axis];
    int64_t inner = extent_product(data, axis + 1, data.size());
    int64_t count = indices.size();
    for (int64_t j = 0; j < count; ++j) {
      int64_t at = wrap_index(c.node(), indices.get_int(j), extent, "index");
      copy_blocks(y, j * inner, count * inner, x, at * inner, extent * inner, outer, inner);
    }
    c.set_output(0, std::move(y));
  };
  return d;
}

// GatherElements and ScatterElements index data with a tensor of data's rank; off the axis, its
// extents must fit inside data's.
void check_elementwise_indices(const InferContext& c, const Shape& data, const Shape& indices, int64_t axis) {
  if (indices.size() != data.size())
    c.fail("indices have rank " + std::to_string(indices.size()) + ", data has rank " + std::to_string(data.size()));
  for (size_t a = 0; a < data.size(); ++a)
    if (static_cast<int64_t>(a) != axis && indices[a] > data[a])
      c.fail("indices shape " + shape_str(indices) + " exceeds data shape " + shape_str(data) + " off the axis");
}

// For each element of `indices`, the flat position in data that it addresses (its own position with the
// axis coordinate replaced by its value).
std::vector<int64_t> elementwise_targets(const Node& n, const Shape& data, const Tensor& indices, int64_t axis) {
  std::vector<int64_t> strides = strides_of(data);
  std::vector<int64_t> targets(indices.size());
  for_each_index(indices.shape(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    int64_t pos = 0;
    for (size_t a = 0; a < idx.size(); ++a) {
      int64_t coord = static_cast<int64_t>(a) == axis ? wrap_index(n, indices.get_int(flat), data[a], "index") : idx[a];
      pos += coord * strides[a];
    }
    targets[flat] = pos;
  });
  return targets;
}

OpDef gather_elements_op() {
  OpDef d;
  d.op_type = "GatherElements";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    c.require_input(1, "indices");
    require_integer_input(c, 1, "indices");
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), c.rank(0));
    check_elementwise_indices(c, c.shape(0), c.shape(1), axis);
    if (const Tensor* idx = c.constant(1))  // as Gather: checked now, never clamped silently
      for (int64_t j = 0; j < idx->size(); ++j) wrap_index(c.node(), idx->get_int(j), c.shape(0)[axis], "index");
    c.set_output(0, c.dtype(0), c.shape(1));
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &indices = c.input(1);
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), x.rank());
    c.set_output(0, gather_by_map(x, indices.shape(), elementwise_targets(c.node(), x.shape(), indices, axis)));
  };
  return d;
}

// The geometry GatherND and ScatterND share: `batch` leading axes common to data and indices, index
// tuples of length `depth` (indices' last extent) that address slices of `slice` elements.
struct NdIndexing {
  int64_t batch_dims = 0;
  int64_t depth = 0;
  int64_t batches = 1;          // product of the batch extents
  int64_t tuples_per_batch = 1;
  int64_t slice = 1;            // elements addressed by one tuple
  Shape result;                 // indices.shape[:-1] + data.shape[batch_dims + depth:]
};

NdIndexing nd_indexing(const Node& n, const Shape& data, const Shape& indices, int64_t batch_dims) {
  int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(indices.size());
  if (q < 1) fail(n, "indices must have rank >= 1");
  NdIndexing g;
  g.batch_dims = batch_dims;
  g.depth = indices.back();
  if (batch_dims < 0 || batch_dims >= q || batch_dims >= std::max<int64_t>(r, 1))
    fail(n, "batch_dims " + std::to_string(batch_dims) + " is out of range");
  if (g.depth < 1 || batch_dims + g.depth > r)
    fail(n, "index tuples of length " + std::to_string(g.depth) + " do not fit data of rank " + std::to_string(r));
  for (int64_t a = 0; a < batch_dims; ++a)
    if (data[a] != indices[a]) fail(n, "batch extents of data " + shape_str(data) + " and indices " + shape_str(indices) + " differ");
  g.batches = extent_product(data, 0, batch_dims);
  g.tuples_per_batch = extent_product(indices, batch_dims, q - 1);
  g.slice = extent_product(data, batch_dims + g.depth, r);
  g.result.assign(indices.begin(), indices.end() - 1);
  g.result.insert(g.result.end(), data.begin() + batch_dims + g.depth, data.end());
  return g;
}

// Flat offset into data of the slice that index tuple t (counted over all batches) addresses.
std::vector<int64_t> nd_offsets(const Node& n, const NdIndexing& g, const Shape& data, const Tensor& indices) {
  std::vector<int64_t> strides = strides_of(data);
  std::vector<int64_t> offsets(g.batches * g.tuples_per_batch);
  int64_t batch_block = extent_product(data, g.batch_dims, data.size());
  for (int64_t t = 0; t < static_cast<int64_t>(offsets.size()); ++t) {
    int64_t pos = (t / std::max<int64_t>(g.tuples_per_batch, 1)) * batch_block;
    for (int64_t k = 0; k < g.depth; ++k) {
      int64_t a = g.batch_dims + k;
      pos += wrap_index(n, indices.get_int(t * g.depth + k), data[a], "index") * strides[a];
    }
    offsets[t] = pos;
  }
  return offsets;
}

OpDef gather_nd_op() {
  OpDef d;
  d.op_type = "GatherND";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    c.require_input(1, "indices");
    require_integer_input(c, 1, "indices");
    NdIndexing g = nd_indexing(c.node(), c.shape(0), c.shape(1), c.node().attr_int("batch_dims", 0));
    if (const Tensor* idx = c.constant(1)) nd_offsets(c.node(), g, c.shape(0), *idx);  // as Gather: checked now
    c.set_output(0, c.dtype(0), g.result);
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &indices = c.input(1);
    NdIndexing g = nd_indexing(c.node(), x.shape(), indices.shape(), c.node().attr_int("batch_dims", 0));
    std::vector<int64_t> offsets = nd_offsets(c.node(), g, x.shape(), indices);
    Tensor y(x.dtype(), g.result);
    for (size_t t = 0; t < offsets.size(); ++t) copy_blocks(y, t * g.slice, 0, x, offsets[t], 0, 1, g.slice);
    c.set_output(0, std::move(y));
  };
  return d;
}

// ---- ScatterND, ScatterElements, Scatter ---------------------------------------------------------------

double scatter_flops(const NodeShapes& s) {
  if (s.node.attr_string("reduction", "none") == "none" || s.in.size() < 3) return 0;
  return static_cast<double>(num_elements(s.in[2]));  // one combine per update element
}

OpDef scatter_nd_op() {
  OpDef d;
  d.op_type = "ScatterND";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "data" : i == 1 ? "indices" : "updates");
    require_integer_input(c, 1, "indices");
    if (c.dtype(2) != c.dtype(0)) c.fail("updates dtype differs from data dtype");
    parse_scatter_reduction(c.node());
    NdIndexing g = nd_indexing(c.node(), c.shape(0), c.shape(1), 0);
    if (c.shape(2) != g.result)
      c.fail("updates have shape " + shape_str(c.shape(2)) + ", expected " + shape_str(g.result));
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &indices = c.input(1), &updates = c.input(2);
    NdIndexing g = nd_indexing(c.node(), x.shape(), indices.shape(), 0);
    std::vector<int64_t> offsets = nd_offsets(c.node(), g, x.shape(), indices);
    ScatterReduction r = parse_scatter_reduction(c.node());
    Tensor y = x;
    for (size_t t = 0; t < offsets.size(); ++t)
      for (int64_t e = 0; e < g.slice; ++e) reduce_into(r, y, offsets[t] + e, updates, t * g.slice + e);
    c.set_output(0, std::move(y));
  };
  d.flops = scatter_flops;
  return d;
}

OpDef scatter_elements_op(std::string name) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "data" : i == 1 ? "indices" : "updates");
    require_integer_input(c, 1, "indices");
    if (c.dtype(2) != c.dtype(0)) c.fail("updates dtype differs from data dtype");
    if (c.shape(2) != c.shape(1)) c.fail("updates shape " + shape_str(c.shape(2)) + " differs from indices shape");
    parse_scatter_reduction(c.node());
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), c.rank(0));
    check_elementwise_indices(c, c.shape(0), c.shape(1), axis);
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor &x = c.input(0), &indices = c.input(1), &updates = c.input(2);
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), x.rank());
    std::vector<int64_t> targets = elementwise_targets(c.node(), x.shape(), indices, axis);
    ScatterReduction r = parse_scatter_reduction(c.node());
    Tensor y = x;
    for (size_t i = 0; i < targets.size(); ++i) reduce_into(r, y, targets[i], updates, i);
    c.set_output(0, std::move(y));
  };
  d.flops = scatter_flops;
  return d;
}

// ---- Compress ----------------------------------------------------------------------------------------------

// Positions along the compressed axis (or the flattened input) whose condition is true. A condition
// shorter than the axis leaves the rest out; a longer one may only be false beyond it.
std::vector<int64_t> compress_selection(const Node& n, const Tensor& condition, int64_t extent) {
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < condition.size(); ++i) {
    if (!condition.get_int(i)) continue;
    if (i >= extent) fail(n, "condition selects position " + std::to_string(i) + " beyond extent " + std::to_string(extent));
    kept.push_back(i);
  }
  return kept;
}

// Compress's output shape and, for each output element, its input element.
Shape compress_plan(const Node& n, const Shape& in, const Tensor& condition, std::vector<int64_t>* map) {
  if (condition.rank() != 1) fail(n, "condition must be 1-D, got " + shape_str(condition.shape()));
  if (!n.has_attr("axis")) {
    std::vector<int64_t> kept = compress_selection(n, condition, num_elements(in));
    if (map) *map = kept;
    return {static_cast<int64_t>(kept.size())};
  }
  int64_t axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  std::vector<int64_t> kept = compress_selection(n, condition, in[axis]);
  Shape out = in;
  out[axis] = static_cast<int64_t>(kept.size());
  if (map) {
    std::vector<int64_t> strides = strides_of(in);
    map->assign(num_elements(out), 0);
    for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t flat) {
      int64_t src = 0;
      for (size_t a = 0; a < idx.size(); ++a) src += (static_cast<int64_t>(a) == axis ? kept[idx[a]] : idx[a]) * strides[a];
      (*map)[flat] = src;
    });
  }
  return out;
}

OpDef compress_op() {
  OpDef d;
  d.op_type = "Compress";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.require_input(1, "condition");
    c.set_output(0, c.dtype(0), compress_plan(c.node(), c.shape(0), c.require_constant(1, "condition"), nullptr));
  };
  d.eval = [](EvalContext& c) {
    std::vector<int64_t> map;
    Shape out = compress_plan(c.node(), c.input(0).shape(), c.input(1), &map);
    c.set_output(0, gather_by_map(c.input(0), out, map));
  };
  return d;
}

// ---- OneHot ------------------------------------------------------------------------------------------------

int64_t onehot_depth(const Node& n, const Tensor& depth) {
  if (depth.size() != 1) fail(n, "depth must have one element");
  double v = depth.get_double(0);
  if (!(v >= 1) || v > 1e9) fail(n, "depth must be a positive extent, got " + std::to_string(v));
  return static_cast<int64_t>(v);
}

// The position of the depth axis in the output (rank of indices + 1).
int64_t onehot_axis(const Node& n, int64_t indices_rank) {
  return normalize_axis(n, n.attr_int("axis", -1), indices_rank + 1);
}

OpDef onehot_op() {
  OpDef d;
  d.op_type = "OneHot";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "indices" : i == 1 ? "depth" : "values");
    if (num_elements(c.shape(2)) != 2) c.fail("values must have two elements (off, on)");
    int64_t depth = onehot_depth(c.node(), c.require_constant(1, "depth"));
    Shape out = c.shape(0);
    out.insert(out.begin() + onehot_axis(c.node(), c.rank(0)), depth);
    c.set_output(0, c.dtype(2), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor &indices = c.input(0), &values = c.input(2);
    int64_t depth = onehot_depth(c.node(), c.input(1));
    int64_t axis = onehot_axis(c.node(), indices.rank());
    Shape out = indices.shape();
    out.insert(out.begin() + axis, depth);
    int64_t outer = extent_product(indices.shape(), 0, axis);
    int64_t inner = extent_product(indices.shape(), axis, indices.shape().size());
    // Every element starts "off"; each in-range index (negatives wrap) turns one "on".
    Tensor y = gather_by_map(values, out, std::vector<int64_t>(num_elements(out), 0));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t flat = o * inner + i;
        int64_t k = indices.is_float_dtype() ? static_cast<int64_t>(std::trunc(indices.get_double(flat)))
                                             : indices.get_int(flat);
        if (k < 0) k += depth;
        if (k >= 0 && k < depth) copy_element(y, (o * depth + k) * inner + i, values, 1);
      }
    c.set_output(0, std::move(y));
  };
  return d;
}

// ---- TopK --------------------------------------------------------------------------------------------------

int64_t topk_k(const Node& n, int64_t opset, const Tensor* k_input, int64_t extent) {
  int64_t k;
  if (opset < 10) {
    k = n.required_int("k");
  } else {
    if (!k_input || k_input->size() != 1) fail(n, "K must be a one-element tensor");
    k = k_input->get_int(0);
  }
  if (k < 0 || k > extent) fail(n, "k " + std::to_string(k) + " is out of range for axis extent " + std::to_string(extent));
  return k;
}

// Indices 0..n-1 of one row ordered best first; stable, so ties keep the lower index first. NaN
// counts as larger than any number, as numpy orders it.
template <typename Key>
void order_row(std::vector<int64_t>& order, const std::vector<Key>& keys, bool largest) {
  auto less = [](Key a, Key b) {
    if constexpr (std::is_floating_point_v<Key>) return !std::isnan(a) && (std::isnan(b) || a < b);
    else return a < b;
  };
  std::iota(order.begin(), order.end(), 0);
  // Ties keep index order (TopK's rule). An explicit tie-break instead of std::stable_sort, whose
  // libstdc++ 12 implementation trips a deprecation warning that -Werror builds reject.
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (largest ? less(keys[b], keys[a]) : less(keys[a], keys[b])) return true;
    if (largest ? less(keys[a], keys[b]) : less(keys[b], keys[a])) return false;
    return a < b;
  });
}

template <typename Key, typename Read>
void topk_rows(const Tensor& x, int64_t axis, int64_t k, bool largest, Read read, Tensor& values, Tensor& indices) {
  const Shape& s = x.shape();
  int64_t outer = extent_product(s, 0, axis), extent = s[axis], inner = extent_product(s, axis + 1, s.size());
  std::vector<Key> keys(extent);
  std::vector<int64_t> order(extent);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t e = 0; e < extent; ++e) keys[e] = read((o * extent + e) * inner + i);
      order_row(order, keys, largest);
      for (int64_t j = 0; j < k; ++j) {
        int64_t dst = (o * k + j) * inner + i;
        copy_element(values, dst, x, (o * extent + order[j]) * inner + i);
        indices.set_int(dst, order[j]);
      }
    }
}

OpDef topk_op() {
  OpDef d;
  d.op_type = "TopK";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (c.rank(0) == 0) c.fail("X must have rank >= 1");
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", -1), c.rank(0));
    const Tensor* k_input = c.opset() >= 10 ? &c.require_constant(1, "K") : nullptr;
    Shape out = c.shape(0);
    out[axis] = topk_k(c.node(), c.opset(), k_input, out[axis]);
    c.set_output(0, c.dtype(0), out);
    c.set_output(1, DType::Int64, out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", -1), x.rank());
    int64_t k = topk_k(c.node(), c.opset(), c.opset() >= 10 ? &c.input(1) : nullptr, x.shape()[axis]);
    // `sorted` = 0 leaves the order unspecified; sorted order is one valid answer.
    bool largest = c.node().attr_int("largest", 1) != 0;
    Shape out = x.shape();
    out[axis] = k;
    Tensor values(x.dtype(), out), indices(DType::Int64, out);
    if (x.is_float_dtype())
      topk_rows<double>(x, axis, k, largest, [&](int64_t i) { return x.get_double(i); }, values, indices);
    else if (x.dtype() == DType::UInt64)
      topk_rows<uint64_t>(x, axis, k, largest, [&](int64_t i) { return static_cast<uint64_t>(x.get_int(i)); }, values,
                          indices);
    else
      topk_rows<int64_t>(x, axis, k, largest, [&](int64_t i) { return x.get_int(i); }, values, indices);
    c.set_output(0, std::move(values));
    c.set_output(1, std::move(indices));
  };
  return d;
}

}  // namespace

void register_shape_index_ops(OpRegistry& r) {
  r.add(slice_op());
  r.add(gather_op());
  r.add(gather_elements_op());
  r.add(gather_nd_op());
  r.add(scatter_nd_op());
  r.add(scatter_elements_op("ScatterElements"));
  r.add(scatter_elements_op("Scatter"));
  r.add(compress_op());
  r.add(onehot_op());
  r.add(topk_op());
}

}  // namespace kiln::shape_family
