/// \file Candidate substitutions proved from the axioms with Z3 (issue 20, point 3).
///
/// Why a prover after the random tests: agreeing on a few random inputs does not make two graphs
/// equal everywhere, and a rewrite applied to every model must be. As TASO does, each operator is an
/// uninterpreted function over one sort of tensors (its parameters are integer arguments), the
/// axioms (axioms.h, each already checked on concrete tensors) are universally quantified equations
/// over it, and a candidate lhs = rhs is proved when Z3 finds lhs != rhs unsatisfiable for fresh
/// leaves under the axioms. The identity constants (I_matmul, I_conv, C_pool, ones) are constants,
/// not quantified. A candidate that Z3 cannot prove within its step limit is dropped and counted:
/// it may be true for a reason no axiom states (ewmul(x, x) = relu(ewmul(x, x))), or only on the
/// shapes the generator tried.
#pragma once
#include <cstdint>
#include <vector>

#include "frontend/subst/generator.h"

namespace kiln::subst {

struct VerifyOptions {
  /// Z3's resource limit per candidate (its "rlimit": a count of solver steps). A step count, unlike
  /// a time limit, proves the same candidates on any machine, so the rule file is reproducible.
  unsigned rlimit = 200000;
};

struct VerifyResult {
  std::vector<Candidate> proved;
  int64_t unproved = 0;
};

/// Proves each candidate from axioms(); keeps the proved ones in order.
VerifyResult verify_candidates(const std::vector<Candidate>& candidates, const VerifyOptions& o = {});

/// Whether lhs = rhs follows from the axioms within the step limit.
bool prove(const TermRef& lhs, const TermRef& rhs, const VerifyOptions& o = {});

}  // namespace kiln::subst
