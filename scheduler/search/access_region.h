/// \file Which elements of a flat buffer an index touches while some of the loops around it run: the
/// access analysis behind the per-store features (features.h). Loop IR indices are flat, so a tile of a
/// 2-D tensor is `i*row + j`; each linear term is treated as a strided dimension of its own, and what
/// is not linear (the divisions and remainders a fused loop leaves) is bounded by interval arithmetic.
#pragma once
#include <cstdint>
#include <vector>

#include "scheduler/te/expr.h"

namespace kiln::search {

/// A loop around an access: its variable and trip count.
struct LoopVar {
  const te::ExprNode* var;
  int64_t extent;
};

/// The loops around an access, outermost first; loops of one iteration only pin their variable at 0.
struct LoopNest {
  std::vector<LoopVar> loops;
  std::vector<const te::ExprNode*> unit_vars;
};

/// An index as constant + sum(coef * var) + sum(coef * atom), atoms being the non-linear parts; the
/// linear part is what strides and dimensions are read from.
struct LinearIndex {
  struct Term {
    const te::ExprNode* var;
    int64_t coef;
  };
  struct Atom {
    te::Expr expr;
    int64_t coef;
    std::vector<const te::ExprNode*> vars;
  };
  int64_t constant = 0;
  std::vector<Term> terms;
  std::vector<Atom> atoms;

  bool is_constant() const { return terms.empty() && atoms.empty(); }
  void scale(int64_t k);
  /// this + sign * o, merging terms of the same variable.
  void add(LinearIndex o, int64_t sign);
};

/// Splits `e` into its linear form (integer index arithmetic; anything else becomes one atom).
LinearIndex linearize(const te::Expr& e);

/// Appends the variables `e` mentions to `out`, each once.
void collect_vars(const te::Expr& e, std::vector<const te::ExprNode*>& out);

/// One access of a buffer by one index, analysed once per store.
struct Access {
  LinearIndex index;
  std::vector<const te::ExprNode*> vars;  // every variable the index mentions

  bool mentions(const te::ExprNode* v) const;
};

/// Linearizes `index` and lists its variables.
Access make_access(const te::Expr& index);

/// The elements an access touches while the loops from `level` inward run: count, bounding range, and
/// the length of the contiguous run starting at its lowest element. Each linear term (and each atom,
/// by its interval) is a strided dimension; dimensions are laid out from the smallest stride up, and a
/// stride below the span laid out so far overlaps it (a sliding window) rather than multiplying it.
struct Region {
  double count;       // distinct elements (at most the buffer's size)
  int64_t lo, hi;     // lowest and highest element, outer loop variables at 0
  double contiguous;  // elements in the dense run that starts at `lo`
};

/// The region of `a` while loops `level` and deeper of `nest` run and the outer ones stay at 0. An
/// index this analysis cannot bound touches the whole buffer.
Region region_of(const Access& a, const LoopNest& nest, size_t level, int64_t buffer_size);

/// How far one step of loop variable `v` (of `extent` iterations) moves an access, at the start of the
/// iteration space: 0 when the access does not depend on it, Ansor's guess of 2 when the index cannot
/// be evaluated.
double step_of(const Access& a, const te::ExprNode* v, int64_t extent, const LoopNest& nest);

}  // namespace kiln::search
