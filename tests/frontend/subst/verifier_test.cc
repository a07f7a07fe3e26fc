// Substitutions proved from the axioms with Z3 (frontend/subst/verifier.h): axioms themselves and
// rules that take several of them are proved, false rules are not, and most of the generator's
// two-operator candidates are proved.
#include "frontend/subst/verifier.h"

#include <gtest/gtest.h>

#include <random>

#include "frontend/subst/axioms.h"
#include "frontend/subst/term_graph.h"

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

// TASO's substitutions by name (its figures): two convs sharing an input as one conv by the
// concatenated kernels, split back; a 1x1 conv enlarged to merge with a 3x3 one; two matmuls sharing
// a left operand as one. Each is proved, and holds on concrete data.
TEST(Verifier, ProvesTasosNamedSubstitutions) {
  const TermRef x = leaf("x"), y = leaf("y"), z = leaf("z"), w = leaf("w"), v = leaf("v"), u = leaf("u");
  const TermRef merged = conv(x, concat(0, w, v));
  const TermRef enlarged = conv(x, concat(0, enlarge(u, 1), w));
  const TermRef matmuls = matmul(x, concat(1, y, z));
  const std::vector<std::pair<TermRef, TermRef>> named = {
      {conv(x, w), split0_at(1, "w", 0, merged)},      {conv(x, v), split1_at(1, "w", 0, merged)},
      {conv(x, u), split0_at(1, "u", 0, enlarged)},    {conv(x, w), split1_at(1, "u", 0, enlarged)},
      {matmul(x, y), split0_at(1, "y", 1, matmuls)},   {matmul(x, z), split1_at(1, "y", 1, matmuls)}};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> d(-1, 1);
  auto values = [&](const Shape& shape) {
    std::vector<double> out(static_cast<size_t>(num_elements(shape)));
    for (double& e : out) e = d(rng);
    return Tensor::from_doubles(DType::Float64, shape, out);
  };
  const std::map<std::string, Tensor> images = {
      {"x", values({1, 3, 5, 5})}, {"w", values({4, 3, 3, 3})}, {"v", values({2, 3, 3, 3})}, {"u", values({2, 3, 1, 1})}};
  const std::map<std::string, Tensor> matrices = {{"x", values({3, 4})}, {"y", values({4, 2})}, {"z", values({4, 5})}};
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [lhs, rhs] = named[i];
    EXPECT_TRUE(prove(lhs, rhs)) << to_string(lhs) << " = " << to_string(rhs);
    const std::vector<Tensor> out = evaluate({lhs, rhs}, i < 4 ? images : matrices);
    ASSERT_EQ(out[0].shape(), out[1].shape()) << to_string(rhs);
    for (int64_t k = 0; k < out[0].size(); ++k) ASSERT_NEAR(out[0].get_double(k), out[1].get_double(k), 1e-9) << to_string(rhs);
  }
  // The split point matters: the other filter count does not give the first conv back.
  EXPECT_FALSE(prove(conv(x, w), split0_at(1, "v", 0, merged)));
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
