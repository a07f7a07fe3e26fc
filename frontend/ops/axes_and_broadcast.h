/// \file Helpers shared by the op family files: normalizing axes, numpy broadcasting, index arithmetic,
/// integer input values, a dtype check and the one-FLOP-per-element count.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "frontend/ops/op_registry.h"

namespace kiln {

/// Maps a possibly negative axis into [0, rank); throws naming the node when it is out of range.
int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank);
std::vector<int64_t> normalize_axes(const Node& node, const std::vector<int64_t>& axes, int64_t rank);

/// Numpy-style multidirectional broadcast of two shapes; nullopt when they are incompatible.
std::optional<Shape> broadcast(const Shape& a, const Shape& b);
/// Broadcasts every present input of a node; fails naming the node when shapes are incompatible.
Shape broadcast_inputs(const InferContext& ctx);

/// For each element of `out` (row-major), the flat index of the element of `in` that broadcasts to it.
/// `in` must be broadcastable to `out`.
std::vector<int64_t> broadcast_index_map(const Shape& out, const Shape& in);

std::vector<int64_t> unravel_index(int64_t flat, const Shape& shape);
int64_t ravel_index(const std::vector<int64_t>& idx, const Shape& shape);

/// The values of an integer tensor (e.g. a shape or axes input).
std::vector<int64_t> tensor_ints(const Tensor& t);

/// Fails unless every present input has the same dtype as input 0; returns that dtype.
DType same_dtype_inputs(const InferContext& ctx);

/// Multiply-add count conventions for `flops`: one FLOP per output element.
double flops_per_output_element(const NodeShapes& s);

}  // namespace kiln
