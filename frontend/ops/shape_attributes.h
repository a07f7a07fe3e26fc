/// \file Attribute parsing of the shape family (Shape, Constant, ConstantOfShape, Transpose, Split,
/// Slice, the Scatter ops), shared by shape inference and the reference kernels (frontend/ops/shape_*.cc)
/// and the TE lowerings (scheduler/te/ops/shape_*_lowering.cc), so the per-opset rules, defaults and
/// clamping exist once and the generated code reads the elements the reference reads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "frontend/ops/op_registry.h"

namespace kiln {

/// The values of integer input `input` (named `what` in errors), nullopt when the optional input is
/// absent. Shape inference requires a compile-time constant, a kernel reads its input, a lowering reads
/// the constant shape inference already required.
using IntInputLookup = std::function<std::optional<std::vector<int64_t>>(size_t input, const char* what)>;

/// Shape's output: the extents of `in` in [start, end) (opset 15+), both clamped after wrapping negatives.
Tensor shape_op_value(const Node& node, const Shape& in);

/// Constant's value, from exactly one of its value* attributes; sparse and string values are unsupported.
Tensor constant_value(const Node& node);

/// ConstantOfShape's fill: the one-element `value` tensor, float32 zero by default.
Tensor constant_of_shape_fill(const Node& node);

/// Transpose's permutation, normalized: output axis k is input axis perm[k]; reversed axes by default.
std::vector<int64_t> transpose_perm(const Node& node, int64_t rank);

/// Split's chunk sizes along an axis of `extent`: given (attribute before opset 13, input 1 since),
/// num_outputs (18+, the last chunk smaller), or equal parts, one per output.
std::vector<int64_t> split_sizes(const Node& node, int64_t extent, const IntInputLookup& int_input);

/// One axis of a slice: output element i reads input element start + i * step; `count` elements.
struct SliceAxis {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

/// Slice's plan per input axis: attributes before opset 10, inputs (starts, ends, axes, steps) from
/// then on. Starts/ends wrap once, then clamp as numpy does.
std::vector<SliceAxis> slice_plan(const Node& node, const Shape& in, const IntInputLookup& int_input);

/// Slice's plan when its starts, ends, axes and steps are compile-time constants of `g`; nullopt when
/// one is computed at run time or the node is malformed. What graph rewrites read a Slice with.
std::optional<std::vector<SliceAxis>> constant_slice_plan(const Graph& g, const Node& n);

/// The [start, end) a constant Slice keeps along `axis` when it keeps every other axis whole and
/// steps by 1 (a split along channels); nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> slice_run_along(const Graph& g, const Node& n, int64_t axis);

/// The offset, in elements, of a constant Slice's output within its input when the output is one
/// contiguous run of it (one axis cut with step 1, every axis before it of extent 1); nullopt
/// otherwise. Such a Slice can be a view of its input.
std::optional<int64_t> contiguous_slice_offset(const Graph& g, const Node& n);

/// How ScatterND/ScatterElements combine an update with the element already there (`reduction`).
enum class ScatterReduction { None, Add, Mul, Max, Min };
ScatterReduction parse_scatter_reduction(const Node& node);

}  // namespace kiln
