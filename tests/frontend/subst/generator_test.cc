// Candidate substitutions (frontend/subst/generator.h): the stage counts shrink as TASO's table does,
// every candidate left agrees on fresh random floats, and the rules one expects of these operators
// are among them (up to renaming and orientation).
#include "frontend/subst/generator.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "frontend/subst/term_graph.h"

namespace kiln::subst {
namespace {

TEST(Generator, CandidatesOfTwoOperatorsShrinkStageByStageAndHoldOnFreshData) {
  const GeneratorResult r = generate_candidates({2, 1});
  const GeneratorStats& s = r.stats;
  EXPECT_GE(s.terms, s.valid);
  EXPECT_GT(s.fingerprint_pairs, 0);
  EXPECT_GE(s.fingerprint_pairs, s.after_float_tests);
  EXPECT_GT(s.after_float_tests, s.after_renaming);
  EXPECT_GT(s.after_renaming, s.after_common_subgraph);
  EXPECT_EQ(static_cast<int64_t>(r.candidates.size()), s.after_common_subgraph);
  std::set<std::string> rules;
  for (const Candidate& c : r.candidates) rules.insert(to_string(c.lhs) + " = " + to_string(c.rhs));
  // Commutativity of ewadd, a transpose involution, relu idempotent, conv with relu fused.
  auto has = [&](const std::string& a, const std::string& b) { return rules.count(a + " = " + b) || rules.count(b + " = " + a); };
  EXPECT_TRUE(has("ewadd(x, y)", "ewadd(y, x)"));
  EXPECT_TRUE(has("transpose(transpose(x))", "x"));
  EXPECT_TRUE(has("relu(relu(x))", "relu(x)"));
  EXPECT_TRUE(has("conv[relu](x, w)", "relu(conv(x, w))"));
  // Every candidate agrees on data the generator never saw.
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const Candidate& c : r.candidates) {
    std::map<std::string, Tensor> values;
    for (const auto& [name, shape] : c.leaf_shapes) {
      std::vector<double> v(static_cast<size_t>(num_elements(shape)));
      for (double& x : v) x = u(rng);
      values[name] = Tensor::from_doubles(DType::Float64, shape, v);
    }
    const std::vector<Tensor> out = evaluate({c.lhs, c.rhs}, values);
    ASSERT_EQ(out[0].shape(), out[1].shape()) << to_string(c.lhs) << " = " << to_string(c.rhs);
    for (int64_t i = 0; i < out[0].size(); ++i)
      ASSERT_NEAR(out[0].get_double(i), out[1].get_double(i), 1e-9) << to_string(c.lhs) << " = " << to_string(c.rhs);
  }
}

}  // namespace
}  // namespace kiln::subst
