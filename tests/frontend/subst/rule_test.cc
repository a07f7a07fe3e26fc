// The rules the optimizer applies (frontend/subst/rule.h, graph_match.h): the rule file reads back
// as written, every half of every merge rule is proved, and every verified rule, found in a graph
// made of its own left-hand side and rewritten there, keeps the reference interpreter's outputs.
#include "frontend/subst/rule.h"

#include <gtest/gtest.h>

#include <random>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"
#include "frontend/subst/graph_match.h"
#include "frontend/subst/term_graph.h"
#include "frontend/subst/verifier.h"

namespace kiln::subst {
namespace {

Tensor random_tensor(const Shape& shape, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) x = d(rng);
  return Tensor::from_doubles(DType::Float64, shape, v);
}

bool uses(const TermRef& t, const std::string& op) {
  if (t->op == op) return true;
  for (const TermRef& a : t->args)
    if (uses(a, op)) return true;
  return false;
}

// The leaf values of the generator's worlds (generator.h): feature maps [1, 2, 3, 3] with 3x3 and 1x1
// kernels, or 3x3 matrices; scalars s, t.
std::map<std::string, Tensor> world_values(const Rule& r, std::mt19937_64& rng) {
  bool fmaps = false;
  for (const TermRef& t : r.lhs)
    for (const char* op : {"conv", "pool_avg", "pool_max", "enlarge"}) fmaps |= uses(t, op);
  std::map<std::string, Tensor> out;
  for (const TermRef& t : r.lhs)
    for (const std::string& l : leaves(t)) {
      Shape s = fmaps ? Shape{1, 2, 3, 3} : Shape{3, 3};
      if (l == "s" || l == "t") s = {};
      else if (fmaps && (l == "w" || l == "v")) s = {2, 2, 3, 3};
      else if (fmaps && l == "u") s = {2, 2, 1, 1};
      out[l] = random_tensor(s, rng);
    }
  return out;
}

TEST(Rules, ParseTheirOwnText) {
  for (const char* text : {"conv[valid, relu, group 2](x, enlarge[from 1](u))", "split1[axis 1, at extent(w, 0)](conv(x, concat[axis 0](w, v)))",
                           "ewadd(smul(x, s), transpose(y))", "conv[depthwise](x, w, b)", "split0[axis 0, at 2](x)"}) {
    EXPECT_EQ(to_string(parse_term(text)), text);
  }
  EXPECT_THROW(parse_term("ewadd(x"), Error);
  EXPECT_THROW(parse_term("frobnicate(x)"), Error);
  EXPECT_THROW(parse_rule_file("relu(x) relu(x)\n", "r.txt"), Error);
  try {
    parse_rule_file("# header\nrelu(x) = relu(relu(x))\nbad(x) = x\n", "r.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r.txt:3"), std::string::npos) << e.what();
  }
  // Both directions, but only where the rewrite can build its right-hand side from what it matched.
  EXPECT_EQ(parse_rule_file("relu(relu(x)) = relu(x)\nsplit0[axis 0, at extent(x, 0)](concat[axis 0](x, y)) = x\n", "r").size(), 3u);
}

TEST(Rules, VerifiedRuleFileIsCompiledIn) {
  EXPECT_GT(verified_rules().size(), 5000u);
}

TEST(Rules, MergeRulesAreProved) {
  for (const Rule& r : merge_rules())
    for (size_t k = 0; k < r.lhs.size(); ++k) EXPECT_TRUE(prove(r.lhs[k], r.rhs[k])) << r.name << ": output " << k;
}

TEST(Rules, SumRulesAreProved) {
  // {plain, depthwise} x {stride 1, 2} x {bias or not} x {3x3 + 3x3, 1x1 + 3x3, 3x3 + 1x1} x {alone, in a running sum}
  ASSERT_EQ(sum_rules().size(), 48u);
  for (const Rule& r : sum_rules()) EXPECT_TRUE(prove(r.lhs[0], r.rhs[0])) << r.name;
}

// Every verified rule (each direction that can be applied) on a graph that is its left-hand side:
// the matcher finds it, the rewrite passes its checks, and the outputs stay the same.
TEST(Rules, EveryVerifiedRuleKeepsTheReferenceOutputs) {
  std::mt19937_64 rng(7);
  int64_t checked = 0;
  for (const Rule& r : verified_rules()) {
    const std::map<std::string, Tensor> values = world_values(r, rng);
    const Graph g = term_model(r.lhs, values);
    const std::vector<Match> matches = find_matches(g, r);
    ASSERT_FALSE(matches.empty()) << r.name << ": " << to_string(r);
    const std::optional<Graph> rewritten = apply_match(g, r, matches[0]);
    ASSERT_TRUE(rewritten) << r.name << ": " << to_string(r);
    const std::vector<Tensor> before = run_reference(g, values), after = run_reference(*rewritten, values);
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) {
      ASSERT_EQ(before[i].shape(), after[i].shape()) << to_string(r);
      for (int64_t e = 0; e < before[i].size(); ++e)
        ASSERT_NEAR(before[i].get_double(e), after[i].get_double(e), 1e-9 * (1 + std::abs(before[i].get_double(e)))) << to_string(r);
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int64_t>(verified_rules().size()));
  EXPECT_GT(checked, 9000);  // most rules apply in both directions
}

}  // namespace
}  // namespace kiln::subst
