/// \file Facts about index expressions that code generation needs to pick a memory access: how an
/// index moves with the vectorized loop variable (contiguous, uniform, scattered) and which values it
/// can take (so a vector access may touch lanes the loop would not without leaving the buffer).
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "scheduler/te/expr.h"
#include "scheduler/te/substitute.h"

namespace kiln::llvm_backend {

/// True when `e` mentions the variable `v` anywhere, the indices of its loads included.
bool depends_on(const te::ExprNode* e, const te::ExprNode* v);

/// The constant coefficient of `v` in `e` when `e` is affine in `v` (scheduler/te/substitute.h); a
/// vector access with coefficient 1 is one contiguous load or store.
using te::linear_coeff;

/// The closed interval [lo, hi] of values an integer expression can take.
struct IndexRange {
  int64_t lo = 0, hi = 0;
};
/// The values each loop variable in scope can take.
using VarRanges = std::unordered_map<const te::ExprNode*, IndexRange>;

/// A sound interval for `e` given its variables' ranges, or nullopt when `e` reads memory, mentions
/// a variable without a range, uses an operator the analysis does not model, or might overflow.
/// Codegen uses it to prove that a vector access stays inside its buffer in every lane, masked-off
/// ones included, so it needs no mask, clamp or edge check.
std::optional<IndexRange> index_range(const te::ExprNode* e, const VarRanges& vars);

}  // namespace kiln::llvm_backend
