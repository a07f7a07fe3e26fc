/// \file Helpers internal to the `shape` op family (shape_ops.cc and the files it registers below):
/// most of these ops only move elements, so they share byte-exact element copies and index maps.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops/axes_and_broadcast.h"
#include "frontend/ops/shape_attributes.h"

namespace kiln::shape_family {

/// Throws Error("node 'n' (Op): msg"). For helpers that both `infer` and `eval` call, so they
/// report the same way whichever context runs them.
[[noreturn]] void fail(const Node& node, const std::string& msg);

/// Copies one element by its bytes, so int64/uint64 values and float bit patterns survive exactly.
/// Both tensors must have the same dtype.
void copy_element(Tensor& dst, int64_t dst_index, const Tensor& src, int64_t src_index);

/// A tensor of `shape` whose element i is src[map[i]]; a negative map entry takes element 0 of `fill`
/// (same dtype as src), or zero when `fill` is null. Transpose, Slice, Pad, Tile, ... are all this.
Tensor gather_by_map(const Tensor& src, Shape shape, const std::vector<int64_t>& map, const Tensor* fill = nullptr);

/// Calls fn(index, flat) for every multi-index of `shape` in row-major order, reusing one index
/// vector so the loop does not allocate per element.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  int64_t n = num_elements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(static_cast<const std::vector<int64_t>&>(idx), flat);
    for (size_t ax = shape.size(); ax-- > 0;) {
      if (++idx[ax] < shape[ax]) break;
      idx[ax] = 0;
    }
  }
}

/// Maps an index in [-extent, extent) to [0, extent); anything else fails naming `what`.
int64_t wrap_index(const Node& node, int64_t index, int64_t extent, const char* what);

/// Fails unless input i has an integer dtype (index and shape inputs).
void require_integer_input(const InferContext& ctx, size_t i, const char* what);

/// The values of integer input i, nullopt when it is absent. Shape inference needs them at compile
/// time (so the infer overload requires a constant); a kernel reads them from its input.
std::optional<std::vector<int64_t>> int_input_values(const InferContext& ctx, size_t i, const char* what);
std::optional<std::vector<int64_t>> int_input_values(const EvalContext& ctx, size_t i, const char* what);
/// int_input_values of `ctx` as the lookup the shared attribute parsers (shape_attributes.h) take.
template <typename Ctx>
IntInputLookup int_inputs(const Ctx& ctx) {
  return [&ctx](size_t i, const char* what) { return int_input_values(ctx, i, what); };
}

/// Copies `rows` blocks of `block` elements between tensors of one dtype; offsets and strides are in elements.
void copy_blocks(Tensor& dst, int64_t dst_offset, int64_t dst_stride, const Tensor& src, int64_t src_offset,
                 int64_t src_stride, int64_t rows, int64_t block);

/// Product of shape[begin, end).
int64_t extent_product(const Shape& shape, size_t begin, size_t end);

/// dst[dst_index] = reduce(dst[dst_index], src[src_index]), in double for floats and int64 otherwise.
void reduce_into(ScatterReduction r, Tensor& dst, int64_t dst_index, const Tensor& src, int64_t src_index);

void register_generated_tensor_ops(OpRegistry& r);       // Constant, ConstantOfShape, EyeLike, Range
void register_expand_tile_transpose_ops(OpRegistry& r);  // Expand, Tile, Transpose
void register_concat_split_ops(OpRegistry& r);           // Concat, Split
void register_shape_index_ops(OpRegistry& r);   // Slice, Gather*, Scatter*, Compress, OneHot, TopK
void register_shape_layout_ops(OpRegistry& r);  // Pad, CenterCropPad, Depth/SpaceToDepth, Trilu, ...

}  // namespace kiln::shape_family
