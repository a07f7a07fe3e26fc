/// \file An integer index as an affine form: sum(coefficient x atom) + constant.
///
/// Why: interval arithmetic on an index as written loses that `i` in `(a + i) * 58 - i * 58` is one
/// value, and a layout rewrite needs each loop's stride in an index; on this form equal atoms are
/// one term and the strides are the coefficients.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "scheduler/te/expr.h"

namespace kiln::te {

/// An atom is a loop variable or a part that is not affine (a floordiv, a min, a load); atoms that are
/// the same expression (same_expr) are one term. A term's coefficient may be 0 after cancellation.
struct Affine {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;

  void add(const Expr& atom, int64_t coeff);
};

/// `e` as an affine form (products with constants, sums, differences and negations unfolded).
Affine affine_form(const Expr& e);

}  // namespace kiln::te
