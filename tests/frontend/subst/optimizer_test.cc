// The substitution search on model graphs (frontend/subst/optimizer.h, graph_match.h, graph_cost.h):
// TASO's merges are found where they apply and refused where they would be wrong, the search keeps
// the reference outputs, its log replays, and the canonical hash ignores names and operand order.
#include "frontend/subst/optimizer.h"

#include <gtest/gtest.h>

#include <random>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"
#include "frontend/subst/graph_match.h"
#include "tests/frontend/test_models.h"

namespace kiln::subst {
namespace {

using testing::random_weights;

// x [1, 16, 8, 8] -> a 1x1 conv (32, relu), a 3x3 conv (32, pad 1, relu), a 1x1 stride-2 conv and a
// 3x3 conv without padding; the first two concatenated, the others outputs of their own.
ModelBuilder branches_model() {
  ModelBuilder b("branches");
  b.input("x", DType::Float32, Shape{1, 16, 8, 8});
  uint32_t seed = 1;
  auto conv = [&](const std::string& name, int64_t k, int64_t stride, int64_t pad, bool relu) {
    b.initializer(name + ".w", random_weights({32, 16, k, k}, seed++));
    b.initializer(name + ".b", random_weights({32}, seed++));
    b.node("Conv", {"x", name + ".w", name + ".b"}, {relu ? name + ".conv" : name})
        .attr("strides", std::vector<int64_t>{stride, stride})
        .attr("pads", std::vector<int64_t>{pad, pad, pad, pad});
    if (relu) b.node("Relu", {name + ".conv"}, {name});
  };
  conv("a", 1, 1, 0, true);
  conv("b", 3, 1, 1, true);
  conv("strided", 1, 2, 0, false);
  conv("unpadded", 3, 1, 0, false);
  b.node("Concat", {"a", "b"}, {"ab"}).attr("axis", int64_t{1});
  b.output("ab", DType::Float32, Shape{1, 64, 8, 8});
  b.output("strided", DType::Float32, Shape{1, 32, 4, 4});
  b.output("unpadded", DType::Float32, Shape{1, 32, 6, 6});
  return b;
}

std::map<std::string, Tensor> inputs_of(const Graph& g) {
  std::map<std::string, Tensor> in;
  uint32_t seed = 100;
  for (const std::string& name : g.inputs) in[name] = random_weights(g.value(name).shape, seed++);
  return in;
}

void expect_same_outputs(const Graph& a, const Graph& b) {
  const auto in = inputs_of(a);
  const std::vector<Tensor> x = run_reference(a, in), y = run_reference(b, in);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(x[i].shape(), y[i].shape());
    for (int64_t e = 0; e < x[i].size(); ++e) ASSERT_NEAR(x[i].get_double(e), y[i].get_double(e), 1e-4) << "output " << i;
  }
}

int count_op(const Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op_type == op; }));
}

const Rule& merge_rule(const std::string& name) {
  for (const Rule& r : merge_rules())
    if (r.name == name) return r;
  throw Error("no merge rule " + name);
}

TEST(GraphMatch, MergesConvsOfOneInputOnlyWhereTheRuleHolds) {
  ModelBuilder b = branches_model();
  const Graph g = testing::prepared_graph(b);
  // The two relu convs with biases: the 1x1 one enlarged to 3x3. The stride-2 conv and the unpadded
  // conv are neither "same" nor stride 1, so nothing else matches.
  const Rule& enlarge_merge = merge_rule("enlarge and merge two relu convs with biases");
  const std::vector<Match> m = find_matches(g, enlarge_merge);
  ASSERT_EQ(m.size(), 2u);  // (a, b) and (b, a); the second would enlarge the 3x3 kernel
  EXPECT_EQ(m[0].roots, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(apply_match(g, enlarge_merge, m[1]));
  // Merged as they are, a 1x1 and a 3x3 kernel do not concatenate: the shape check refuses it.
  const std::vector<Match> plain = find_matches(g, merge_rule("merge two relu convs with biases"));
  ASSERT_EQ(plain.size(), 1u);  // (a, b) only: merging is symmetric
  EXPECT_FALSE(apply_match(g, merge_rule("merge two relu convs with biases"), plain[0]));
  const std::optional<Graph> merged = apply_match(g, enlarge_merge, m[0]);
  ASSERT_TRUE(merged);
  EXPECT_EQ(count_op(*merged, "Conv"), 3);
  EXPECT_EQ(count_op(*merged, "Slice"), 2);
  expect_same_outputs(g, *merged);
}

TEST(GraphMatch, RefusesARewriteThatWouldMakeACycle) {
  // y = conv(x, w) and z = conv(y, v): merging them as convs of one input is not a match (different
  // inputs), and a relu rule whose leaf is its own output cannot be built.
  ModelBuilder b("chain");
  b.input("x", DType::Float32, Shape{1, 4, 5, 5});
  b.initializer("w", random_weights({4, 4, 3, 3}, 1));
  b.initializer("v", random_weights({4, 4, 3, 3}, 2));
  b.node("Conv", {"x", "w"}, {"y"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Conv", {"y", "v"}, {"z"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.output("z", DType::Float32, Shape{1, 4, 5, 5});
  const Graph g = testing::prepared_graph(b);
  EXPECT_TRUE(find_matches(g, merge_rule("merge two convs")).empty());
  // A hand-made match whose leaf x is the second root's own output: the rewrite would read what it
  // computes.
  Match cyclic{{{"x", "z"}, {"w", "w"}, {"v", "v"}}, {"y", "z"}, {}};
  EXPECT_FALSE(apply_match(g, merge_rule("merge two convs"), cyclic));
}

TEST(Optimizer, FindsTheMergeAndKeepsTheOutputs) {
  ModelBuilder b = branches_model();
  const Graph g = testing::prepared_graph(b);
  SearchOptions o;
  o.cost = roofline_for(512, 1);
  const SearchResult r = optimize_graph_substitutions(g, default_rules(), o);
  EXPECT_LT(r.final_cost, r.initial_cost);
  ASSERT_FALSE(r.log.empty());
  EXPECT_EQ(r.log.back().cost_after, r.final_cost);
  EXPECT_EQ(count_op(r.graph, "Conv"), 3);
  expect_same_outputs(g, r.graph);
  EXPECT_NE(format_rewrites(r).find("enlarge and merge"), std::string::npos) << format_rewrites(r);
  // The log replays: the same rewrites on the input give the same graph.
  const Graph replayed = replay_rewrites(g, default_rules(), r.log);
  EXPECT_EQ(canonical_hash(replayed), canonical_hash(r.graph));
}

TEST(Optimizer, ABudgetOfNoGraphsChangesNothing) {
  ModelBuilder b = branches_model();
  const Graph g = testing::prepared_graph(b);
  SearchOptions o;
  o.cost = roofline_for(512, 1);
  o.budget = 0;
  const SearchResult r = optimize_graph_substitutions(g, default_rules(), o);
  EXPECT_TRUE(r.log.empty());
  EXPECT_EQ(canonical_hash(r.graph), canonical_hash(g));
}

TEST(Optimizer, CanonicalHashIgnoresNamesAndOperandOrder) {
  auto model = [](const std::string& mid, bool swapped) {
    ModelBuilder b("h");
    b.input("x", DType::Float32, Shape{2, 3});
    b.input("y", DType::Float32, Shape{2, 3});
    b.node("Relu", {"x"}, {mid});
    b.node("Add", swapped ? std::vector<std::string>{"y", mid} : std::vector<std::string>{mid, "y"}, {"out"});
    b.output("out", DType::Float32, Shape{2, 3});
    return b;
  };
  ModelBuilder a = model("m", false), c = model("other_name", true);
  ModelBuilder sub("h");
  sub.input("x", DType::Float32, Shape{2, 3});
  sub.input("y", DType::Float32, Shape{2, 3});
  sub.node("Relu", {"x"}, {"m"});
  sub.node("Sub", {"m", "y"}, {"out"});
  sub.output("out", DType::Float32, Shape{2, 3});
  EXPECT_EQ(canonical_hash(testing::prepared_graph(a)), canonical_hash(testing::prepared_graph(c)));
  EXPECT_NE(canonical_hash(testing::prepared_graph(a)), canonical_hash(testing::prepared_graph(sub)));
}

}  // namespace
}  // namespace kiln::subst
