/// \file Helpers shared by the `shape` family's lowerings (shape_lowering.cc, shape_index_lowering.cc,
/// shape_layout_lowering.cc). Most of these ops only move elements, so they share index arithmetic:
/// flattening, wrapping data-dependent indices, and copies under a new shape.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops/shape_attributes.h"
#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te::shape_lowering {

/// The values of integer input i, which shape inference already required to be a compile-time
/// constant; nullopt when the optional input is absent.
std::optional<std::vector<int64_t>> optional_ints(const LowerContext& c, size_t i, const char* what);
/// optional_ints of `c` as the lookup the shared attribute parsers (frontend/ops/shape_attributes.h) take.
IntInputLookup int_inputs(const LowerContext& c);
/// Like optional_ints, but the input must be present.
std::vector<int64_t> required_ints(const LowerContext& c, size_t i, const char* what);

/// A node's axis attribute mapped into [0, rank).
int64_t axis_attr(const LowerContext& c, const char* name, int64_t dflt, int64_t rank);

/// Row-major flat position of `idx` in `shape` (Int64).
Expr flat_index(const std::vector<Expr>& idx, const Shape& shape);
/// The multi-index of flat position `flat` in `shape`; every coordinate lies inside its extent as long as
/// `flat` lies inside the shape.
std::vector<Expr> unflatten(const Expr& flat, const Shape& shape);

/// Element `flat` (a compile-time position) of `t`: for one-element inputs (fill values, k, sequence
/// bounds) and the (off, on) pair of OneHot.
Expr load_at_flat(const TensorRef& t, int64_t flat);

/// A data-dependent index of an axis of extent n, as an Int64 expression: negatives wrap once (+n), then
/// the result is clamped into [0, n) so the load it feeds can never leave the tensor.
Expr wrap_and_clamp(const Expr& index, int64_t n);
/// Only the wrap: for comparing a data-dependent index with a loop index (no load uses it).
Expr wrap_index(const Expr& index, int64_t n);

/// A copy of x's elements in row-major order under `shape` (same element count): Reshape, Flatten,
/// Squeeze, Unsqueeze, Identity.
TensorRef reshaped_copy(const TensorRef& x, const Shape& shape, const std::string& name);

/// The dtype arithmetic on `t` runs in: float32 for the half-precision floats, `t` otherwise.
DType arith_dtype(DType t);

/// A reduction whose result has dtype `dtype`. Half-precision floats accumulate in float32 and a second
/// stage casts back. `body` receives the accumulation dtype and must produce values in it.
using ArithReduceFn = std::function<Expr(DType, const std::vector<Expr>& idx, const std::vector<Expr>& ridx)>;
TensorRef reduce_in_arith_dtype(const LowerContext& c, const std::string& suffix, const std::string& tag, DType dtype,
                                const Shape& shape, Reducer reducer, const std::vector<int64_t>& extents,
                                const ArithReduceFn& body);

void register_shape_index_lowerings(LoweringRegistry& r);   // Slice, Gather*, Scatter*, Compress, OneHot, TopK
void register_shape_layout_lowerings(LoweringRegistry& r);  // Pad, CenterCropPad, Depth/SpaceToDepth, Trilu, ...

}  // namespace kiln::te::shape_lowering
