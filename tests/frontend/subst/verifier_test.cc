// Substitutions proved from the axioms with Z3 (frontend/subst/verifier.h): axioms themselves and
// rules that take several of them are proved, false rules are not, and most of the generator's
// two-operator candidates are proved.
#include "frontend/subst/verifier.h"

#include <gtest/gtest.h>

#include "frontend/subst/axioms.h"

namespace kiln::subst {
namespace {

TEST(Verifier, ProvesRulesThatFollowFromTheAxiomsAndNotOthers) {
  const TermRef x = leaf("x"), y = leaf("y"), z = leaf("z"), w = leaf("w"), v = leaf("v"), s = leaf("s");
  EXPECT_TRUE(prove(ewadd(x, y), ewadd(y, x)));
  // Commutativity and associativity together.
  EXPECT_TRUE(prove(ewadd(x, ewadd(y, z)), ewadd(z, ewadd(y, x))));
  // Transpose of a product of three, by the transpose rule twice and associativity.
  EXPECT_TRUE(prove(transpose(matmul(matmul(x, y), z)), matmul(transpose(z), matmul(transpose(y), transpose(x)))));
  // Conv merging's single-output half: one conv by concatenated kernels, split back.
  EXPECT_TRUE(prove(conv(x, concat(0, w, v)), concat(1, conv(x, w), conv(x, v))));
  EXPECT_TRUE(prove(smul(conv(ewadd(x, y), w), s), ewadd(conv(x, smul(w, s)), conv(y, smul(w, s)))));
  // False: matmul does not commute; relu is not linear; a fused relu is not linear.
  EXPECT_FALSE(prove(matmul(x, y), matmul(y, x)));
  EXPECT_FALSE(prove(relu(ewadd(x, y)), ewadd(relu(x), relu(y))));
  EXPECT_FALSE(prove(conv(ewadd(x, y), w, true, true), ewadd(conv(x, w, true, true), conv(y, w, true, true))));
}

TEST(Verifier, ProvesMostTwoOperatorCandidates) {
  const GeneratorResult g = generate_candidates({2, 1});
  const VerifyResult r = verify_candidates(g.candidates);
  EXPECT_EQ(static_cast<int64_t>(r.proved.size()) + r.unproved, static_cast<int64_t>(g.candidates.size()));
  EXPECT_GT(r.proved.size(), g.candidates.size() / 2);
  EXPECT_GT(r.unproved, 0);  // ewmul(x, x) = relu(ewmul(x, x)) is true, but no axiom says so
}

}  // namespace
}  // namespace kiln::subst
