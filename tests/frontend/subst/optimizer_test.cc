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

// x [1, 16, 8, 8] -> a 1x1 conv a (32, relu), 3x3 convs b and c (32, pad 1, relu), a 1x1 stride-2
// conv and a 3x3 conv without padding; a, b and c each read by a 1x1 conv (a2 + b2 added, c2), the
// others outputs of their own.
ModelBuilder branches_model() {
  ModelBuilder b("branches");
  b.input("x", DType::Float32, Shape{1, 16, 8, 8});
  uint32_t seed = 1;
  auto conv = [&](const std::string& name, int64_t k, int64_t stride, int64_t pad, bool relu, const std::string& in = "x") {
    const int64_t channels = in == "x" ? 16 : 32;
    b.initializer(name + ".w", random_weights({32, channels, k, k}, seed++));
    b.initializer(name + ".b", random_weights({32}, seed++));
    b.node("Conv", {in, name + ".w", name + ".b"}, {relu ? name + ".conv" : name})
        .attr("strides", std::vector<int64_t>{stride, stride})
        .attr("pads", std::vector<int64_t>{pad, pad, pad, pad});
    if (relu) b.node("Relu", {name + ".conv"}, {name});
  };
  conv("a", 1, 1, 0, true);
  conv("b", 3, 1, 1, true);
  conv("strided", 1, 2, 0, false);
  conv("unpadded", 3, 1, 0, false);
  conv("c", 3, 1, 1, true);
  conv("a2", 1, 1, 0, false, "a");
  conv("b2", 1, 1, 0, false, "b");
  conv("c2", 1, 1, 0, false, "c");
  b.node("Add", {"a2", "b2"}, {"ab"});
  b.output("c2", DType::Float32, Shape{1, 32, 8, 8});
  b.output("ab", DType::Float32, Shape{1, 32, 8, 8});
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
  // a with b or c, in either order; only those that enlarge a (the 1x1 kernel) pass the shape check.
  ASSERT_EQ(m.size(), 6u);  // (a, b), (a, c), (b, a), (b, c), (c, a), (c, b)
  std::optional<Graph> merged;
  for (const Match& match : m) {
    std::optional<Graph> applied = apply_match(g, enlarge_merge, match);
    EXPECT_EQ(applied.has_value(), match.leaves.at("u") == "a.w") << match.roots[0] << ", " << match.roots[1];
    if (applied && match.roots == std::vector<std::string>{"a", "b"}) merged = std::move(applied);
  }
  ASSERT_TRUE(merged);
  // Merged as they are, a 1x1 and a 3x3 kernel do not concatenate; b and c (both 3x3) do.
  const std::vector<Match> plain = find_matches(g, merge_rule("merge two relu convs with biases"));
  ASSERT_EQ(plain.size(), 3u);  // (a, b), (a, c), (b, c): merging is symmetric
  for (const Match& match : plain)
    EXPECT_EQ(apply_match(g, merge_rule("merge two relu convs with biases"), match).has_value(), match.roots[0] == "b");
  EXPECT_EQ(count_op(*merged, "Conv"), 7);
  EXPECT_EQ(count_op(*merged, "Slice"), 2);
  expect_same_outputs(g, *merged);
}

// RepVGG's training-time block: a 3x3 and a 1x1 conv of one input (biases from their folded batch
// norms), added. Summed as they are, the kernels would broadcast (ONNX Add takes [k, c, 1, 1] with
// [k, c, 3, 3]), which no axiom covers: refused. With the 1x1 kernel enlarged they are one conv.
TEST(GraphMatch, SumsTwoConvsOfOneInputOnlyWithTheKernelsOfOneShape) {
  ModelBuilder b("repvgg_block");
  b.input("x", DType::Float32, Shape{1, 8, 6, 6});
  b.initializer("w", random_weights({8, 8, 3, 3}, 1));
  b.initializer("b", random_weights({8}, 2));
  b.initializer("u", random_weights({8, 8, 1, 1}, 3));
  b.initializer("c", random_weights({8}, 4));
  b.node("Conv", {"x", "w", "b"}, {"dense"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Conv", {"x", "u", "c"}, {"one"});
  b.node("Add", {"dense", "one"}, {"sum"});
  b.node("Relu", {"sum"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 8, 6, 6});
  const Graph g = testing::prepared_graph(b);
  auto sum_rule = [](const std::string& name) -> const Rule& {
    for (const Rule& r : sum_rules())
      if (r.name == name) return r;
    throw Error("no sum rule " + name);
  };
  const Rule& plain = sum_rule("sum two convs with biases");
  const std::vector<Match> broadcast = find_matches(g, plain);
  ASSERT_FALSE(broadcast.empty());
  for (const Match& m : broadcast) {
    EXPECT_FALSE(apply_match(g, plain, m)) << m.leaves.at("w") << " + " << m.leaves.at("v");
    EXPECT_FALSE(cost_change(g, GraphReaders(g), plain, m, roofline_for(512, 1)));
  }
  const Rule& enlarged = sum_rule("enlarge and sum two convs with biases");
  const std::vector<Match> m = find_matches(g, enlarged);
  ASSERT_EQ(m.size(), 1u);  // v is the 1x1 kernel
  const std::optional<Graph> one = apply_match(g, enlarged, m[0]);
  ASSERT_TRUE(one);
  EXPECT_EQ(count_op(*one, "Conv"), 1);
  EXPECT_EQ(count_op(*one, "Add"), 0);  // the kernels' and biases' sums folded into constants
  expect_same_outputs(g, *one);
  // And the search finds it.
  SearchOptions o;
  o.cost = roofline_for(512, 1);
  const SearchResult r = optimize_graph_substitutions(g, default_rules(), o);
  EXPECT_EQ(count_op(r.graph, "Conv"), 1);
  expect_same_outputs(g, r.graph);
}

// MobileOne's training-time depthwise block: a 1x1 branch, a skip branch (the per-channel affine a
// lone batch norm folds to) and three 3x3 branches, summed one after another as PyTorch's `out +=`
// writes them, at stride 1 and, without the skip, at stride 2. The search sums every conv into one.
// A stride-2 conv padded SAME_UPPER (one-sided on an even map) is not the term's "same": not summed.
TEST(GraphMatch, SumsDepthwiseAndStridedBranchesOfARunningSum) {
  ModelBuilder b("mobileone_block");
  b.input("x", DType::Float32, Shape{1, 8, 6, 6});
  uint32_t seed = 1;
  auto conv = [&](const std::string& name, int64_t k, int64_t stride, bool depthwise, const std::string& auto_pad = "") {
    b.initializer(name + ".w", random_weights({8, depthwise ? 1 : 8, k, k}, seed++));
    b.initializer(name + ".b", random_weights({8}, seed++));
    auto n = b.node("Conv", {"x", name + ".w", name + ".b"}, {name});
    n.attr("strides", std::vector<int64_t>{stride, stride}).attr("group", int64_t{depthwise ? 8 : 1});
    if (!auto_pad.empty()) n.attr("auto_pad", auto_pad);
    else n.attr("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
    return name;
  };
  auto add = [&](const std::string& x, const std::string& y, const std::string& out) {
    b.node("Add", {x, y}, {out});
    return out;
  };
  b.initializer("skip.scale", random_weights({1, 8, 1, 1}, seed++));
  b.initializer("skip.shift", random_weights({1, 8, 1, 1}, seed++));
  b.node("Mul", {"x", "skip.scale"}, {"skip.mul"});
  b.node("Add", {"skip.mul", "skip.shift"}, {"skip"});
  std::string sum = add(conv("scale", 1, 1, true), "skip", "sum");
  for (int i = 0; i < 3; ++i) sum = add(sum, conv("dw" + std::to_string(i), 3, 1, true), "sum" + std::to_string(i));
  b.node("Relu", {sum}, {"y"});
  std::string strided = add(conv("s.scale", 1, 2, false), conv("s.conv0", 3, 2, false), "s.sum");
  strided = add(strided, conv("s.conv1", 3, 2, false), "s.sum1");
  add(conv("u.conv0", 3, 2, false, "SAME_UPPER"), conv("u.conv1", 3, 2, false, "SAME_UPPER"), "u.sum");
  b.output("y", DType::Float32, Shape{1, 8, 6, 6});
  b.output(strided, DType::Float32, Shape{1, 8, 3, 3});
  b.output("u.sum", DType::Float32, Shape{1, 8, 3, 3});
  const Graph g = testing::prepared_graph(b);
  ASSERT_EQ(count_op(g, "Conv"), 9);
  SearchOptions o;
  o.cost = roofline_for(512, 1);
  const SearchResult r = optimize_graph_substitutions(g, default_rules(), o);
  // One depthwise conv (the skip's affine stays apart), one strided conv, the two SAME_UPPER ones.
  EXPECT_EQ(count_op(r.graph, "Conv"), 4);
  // Each rewrite sums one branch in; none rewrites the kernels' sums, which fold.
  EXPECT_EQ(r.log.size(), 5u);
  for (const Node& n : r.graph.nodes) {
    if (n.op_type == "Conv" && n.attr_ints("strides") == std::vector<int64_t>{1, 1}) {
      EXPECT_EQ(n.attr_int("group", 1), 8);
    }
  }
  expect_same_outputs(g, r.graph);
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
  // b and c merged; enlarging a would cost 9x its arithmetic, more than a merge saves here.
  EXPECT_EQ(count_op(r.graph, "Conv"), 7);
  expect_same_outputs(g, r.graph);
  EXPECT_NE(format_rewrites(r).find("merge two relu convs with biases at b, c"), std::string::npos) << format_rewrites(r);
  // The log replays: the same rewrites on the input give the same graph.
  const Graph replayed = replay_rewrites(g, default_rules(), r.log);
  EXPECT_EQ(canonical_hash(replayed), canonical_hash(r.graph));
}

// A rule whose sides differ only in argument order leads only to graphs the canonical hash has seen,
// so the search leaves it out; the verified set keeps it (it is true).
// A channel Slice of a conv's output costs nothing where the layout stage keeps it on the blocks
// (from a block's start) and two passes each way where it does not: at block 16, [0, 16) and
// [16, 24) of 24 channels are free, [8, 24) is not; without a block (vectors of 32 bits) all are.
TEST(GraphCost, ChannelSlicesOffABlockStartCostReorders) {
  auto cost_of_split = [](int64_t at, int vector_bits) {
    ModelBuilder b("split");
    b.input("x", DType::Float32, Shape{1, 16, 8, 8});
    b.initializer("w", random_weights({24, 16, 1, 1}, 1));
    b.node("Conv", {"x", "w"}, {"c"});
    b.initializer("zero", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{0}));
    b.initializer("at", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{at}));
    b.initializer("end", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{24}));
    b.initializer("axis", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{1}));
    b.node("Slice", {"c", "at", "end", "axis"}, {"tail"});
    b.node("Relu", {"tail"}, {"y"});
    b.output("y", DType::Float32, Shape{});
    const Graph g = testing::prepared_graph(b);
    const Roofline r = roofline_for(vector_bits, 1);
    double slice = 0;
    for (const Node& n : g.nodes)
      if (n.op_type == "Slice") slice = nodes_cost(g, {&n}, r);
    return slice;
  };
  EXPECT_EQ(roofline_for(512, 1).channel_block, 16);
  EXPECT_EQ(cost_of_split(16, 512), 0.0);
  EXPECT_GT(cost_of_split(8, 512), 0.0);
  EXPECT_EQ(cost_of_split(8, 256), 0.0);  // blocks of 8
  EXPECT_EQ(cost_of_split(0, 512), 0.0);  // the whole
}

TEST(Optimizer, PureCommutationsAreNotSearched) {
  std::string commutation;
  for (const Rule& r : verified_rules())
    if (to_string(r) == "ewadd(x, y) => ewadd(y, x)") commutation = r.name;
  ASSERT_FALSE(commutation.empty());
  int merges = 0;
  for (const Rule& r : default_rules()) {
    EXPECT_NE(r.name, commutation);
    merges += r.lhs.size() > 1;
  }
  EXPECT_EQ(merges, static_cast<int>(merge_rules().size()));
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

namespace kiln::subst {
namespace {

// Two Linear layers of one input, each read by a Reshape (BERT's query and key projections, then
// their split into heads): merged into one matmul with the biases concatenated.
TEST(Optimizer, MergesLinearLayersOfOneInput) {
  ModelBuilder b("linear");
  b.input("x", DType::Float32, Shape{1, 4, 8});
  b.initializer("shape", Tensor::from_ints(DType::Int64, {4}, std::vector<int64_t>{1, 4, 2, 3}));
  for (const std::string p : {"q", "k"}) {
    b.initializer(p + ".w", testing::random_weights({8, 6}, p == "q" ? 1 : 2));
    b.initializer(p + ".b", testing::random_weights({6}, p == "q" ? 3 : 4));
    b.node("MatMul", {"x", p + ".w"}, {p + ".mm"});
    b.node("Add", {p + ".mm", p + ".b"}, {p});
    b.node("Reshape", {p, "shape"}, {p + ".heads"});
    b.output(p + ".heads", DType::Float32, Shape{1, 4, 2, 3});
  }
  const Graph g = testing::prepared_graph(b);
  const Rule& rule = merge_rule("merge two matmuls with biases");
  const std::vector<Match> m = find_matches(g, rule);
  ASSERT_EQ(m.size(), 1u);
  const GraphReaders readers(g);
  const std::optional<double> change = cost_change(g, readers, rule, m[0], roofline_for(512, 1));
  ASSERT_TRUE(change);
  EXPECT_LT(*change, 0);
  SearchOptions o;
  o.cost = roofline_for(512, 1);
  const SearchResult r = optimize_graph_substitutions(g, default_rules(), o);
  EXPECT_EQ(count_op(r.graph, "MatMul"), 1) << format_rewrites(r);
  expect_same_outputs(g, r.graph);
  // Asked for more than the merge saves, the search keeps the input as it was.
  o.min_gain = 0.99 * (r.initial_cost - r.final_cost) / r.initial_cost + 0.01;
  const SearchResult kept = optimize_graph_substitutions(g, default_rules(), o);
  EXPECT_TRUE(kept.log.empty());
  EXPECT_EQ(kept.final_cost, kept.initial_cost);
  EXPECT_EQ(count_op(kept.graph, "MatMul"), 2);
}

}  // namespace
}  // namespace kiln::subst
