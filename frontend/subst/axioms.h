/// \file TASO's operator properties as axioms, each checked on concrete tensors before it is trusted.
///
/// Why checked: the verifier (issue 20, point 3) will prove substitutions from these axioms alone, so
/// a wrong axiom would let it prove a wrong rewrite. Each axiom is an equation between two terms
/// (term.h) with the shapes it holds for; `check_axiom` evaluates both sides with the reference
/// interpreter on every shape case up to 4x4x4x4 (each extent 1 to 4) with random small integers, so
/// sums and products are exact and any difference is a real one. The list follows the properties
/// TASO's paper and verifier state (associativity, commutativity and distributivity of the
/// element-wise ops, linearity of matmul and conv in each argument, transpose rules, concat and split
/// identities, identity constants, enlarge, pooling as a convolution), written afresh for kiln's ops.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/tensor.h"
#include "frontend/subst/term.h"

namespace kiln::subst {

/// One assignment of leaf values to check an axiom on.
using LeafValues = std::map<std::string, Tensor>;

struct Axiom {
  std::string name;  // "ewadd is associative"
  TermRef lhs, rhs;
  /// The cases to check: leaf values drawn with `seed`, one map per shape case.
  std::function<std::vector<LeafValues>(uint64_t seed)> cases;
};

/// Every axiom, in a fixed order (the order of the rule file's axiom hash, later).
const std::vector<Axiom>& axioms();

/// A hash of every axiom's statement (16 hex digits): the rule file is stamped with it, so a rule set
/// proved from other axioms is told apart.
std::string axioms_hash();

struct AxiomCheck {
  int64_t cases = 0;    // shape cases evaluated
  int64_t failed = 0;   // cases where the two sides differ
  std::string first_failure;  // the first such case's shapes and largest difference
};

/// Evaluates both sides of `a` on every case (`max_cases` > 0: on that many, evenly spaced through
/// the list, for quick checks); an axiom holds when no case fails.
AxiomCheck check_axiom(const Axiom& a, uint64_t seed = 1, int64_t max_cases = 0);

}  // namespace kiln::subst
