/// \file Candidate substitutions, enumerated as TASO's generator finds them (issue 20, points 2 and 4).
///
/// Every term of up to `max_ops` operators over a small typed world of leaves is built (matrices with
/// a scalar; feature maps with 3x3 and 1x1 kernels), evaluated on fixed random integers, and
/// fingerprinted by its shape and a hash of its values. Terms with equal fingerprints are candidate
/// pairs; each pair is then evaluated again on random floats, which removes the pairs that agreed by
/// luck. Two prunings follow, as TASO's table reports them: pairs equal up to renaming their leaves
/// are kept once, and pairs implied by a smaller one are dropped: the same operator at both roots
/// whose one differing argument pair is itself equivalent (a common output subgraph), or a non-leaf
/// subterm on both sides that a fresh leaf can replace with the pair still holding (a common input
/// subgraph; the pair is then an instance of a more general one). What is left is what the
/// verifier (Z3, next) must prove from the axioms. Single-output terms only, so far; TASO's
/// multi-output graphs (two convs sharing an input merged into one) come with the verifier.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/tensor.h"
#include "frontend/subst/term.h"

namespace kiln::subst {

struct GeneratorOptions {
  int max_ops = 3;
  uint64_t seed = 1;
};

struct Candidate {
  TermRef lhs, rhs;
  std::map<std::string, Shape> leaf_shapes;  // the shape of each leaf in the world it was found in
};

/// The count after each stage, TASO's table 4 as far as it is built.
struct GeneratorStats {
  int64_t terms = 0;                   // enumerated
  int64_t valid = 0;                   // whose shapes fit (evaluated)
  int64_t fingerprint_pairs = 0;       // pairs of valid terms with equal fingerprints
  int64_t after_float_tests = 0;       // ... that also agree on random floats
  int64_t after_renaming = 0;          // ... kept once up to renaming leaves
  int64_t after_common_subgraph = 0;   // ... not implied by a smaller pair
};

struct GeneratorResult {
  std::vector<Candidate> candidates;  // after every stage, in a stable order
  GeneratorStats stats;
};

GeneratorResult generate_candidates(const GeneratorOptions& o);

}  // namespace kiln::subst
