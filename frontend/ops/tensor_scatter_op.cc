// TensorScatter: writes an update into a key/value cache along its sequence axis.
#include <cstring>

#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

// Writes `update` into a copy of `past_cache` along the sequence axis, at write_indices[batch] (0 when
// absent) for each batch entry; mode "circular" wraps positions modulo the cache length.
struct ScatterGeometry {
  int64_t axis, batch, prefix, cache_len, update_len, inner;
  bool circular;
};

ScatterGeometry tensor_scatter_geometry(const Node& node, const Shape& cache, const Shape& update) {
  int64_t r = static_cast<int64_t>(cache.size());
  if (r < 2) fail(node, "past_cache must have rank >= 2, got " + shape_str(cache));
  if (update.size() != cache.size())
    fail(node, "update " + shape_str(update) + " must have the rank of past_cache " + shape_str(cache));
  int64_t axis = normalize_axis(node, node.attr_int("axis", -2), r);
  if (axis == 0) fail(node, "axis must not be the batch axis 0");
  for (int64_t a = 0; a < r; ++a)
    if (a != axis && update[a] != cache[a])
      fail(node, "update " + shape_str(update) + " and past_cache " + shape_str(cache) +
                     " may differ only along axis " + std::to_string(axis));
  if (update[axis] > cache[axis])
    fail(node, "update is longer than the cache along axis " + std::to_string(axis));
  std::string mode = node.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") fail(node, "mode must be 'linear' or 'circular', got '" + mode + "'");
  ScatterGeometry g{axis, cache[0], 1, cache[axis], update[axis], 1, mode == "circular"};
  for (int64_t a = 0; a < axis; ++a) g.prefix *= cache[a];
  for (int64_t a = axis + 1; a < r; ++a) g.inner *= cache[a];
  return g;
}

OpDef tensor_scatter_op() {
  OpDef d;
  d.op_type = "TensorScatter";
  d.infer = [](InferContext& c) {
    c.require_input(0, "past_cache");
    c.require_input(1, "update");
    if (c.dtype(1) != c.dtype(0)) c.fail("update must have past_cache's dtype " + dtype_name(c.dtype(0)));
    ScatterGeometry g = tensor_scatter_geometry(c.node(), c.shape(0), c.shape(1));
    if (c.has_input(2)) {
      require_integer_input(c, 2, "write_indices");
      if (c.shape(2) != Shape{g.batch}) c.fail("write_indices must be [batch], got " + shape_str(c.shape(2)));
    }
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& cache = c.input(0);
    const Tensor& update = c.input(1);
    ScatterGeometry g = tensor_scatter_geometry(c.node(), cache.shape(), update.shape());
    Tensor out = cache;
    size_t row_bytes = static_cast<size_t>(g.inner) * dtype_size(cache.dtype());
    int64_t per_batch = g.prefix / std::max<int64_t>(g.batch, 1);
    for (int64_t p = 0; p < g.prefix; ++p) {
      int64_t batch = p / per_batch;
      int64_t start = c.has_input(2) ? c.input(2).get_int(batch) : 0;
      if (start < 0 || (!g.circular && start + g.update_len > g.cache_len))
        c.fail("write index " + std::to_string(start) + " with " + std::to_string(g.update_len) +
               " updates does not fit a cache of length " + std::to_string(g.cache_len));
      for (int64_t s = 0; s < g.update_len; ++s) {
        int64_t pos = (start + s) % g.cache_len;
        std::memcpy(out.data() + (p * g.cache_len + pos) * row_bytes, update.data() + (p * g.update_len + s) * row_bytes,
                    row_bytes);
      }
    }
    c.set_output(0, std::move(out));
  };
  return d;
}

}  // namespace

void register_tensor_scatter_op(OpRegistry& r) {
  r.add(tensor_scatter_op());
}

}  // namespace kiln::misc
