// If nodes (frontend/passes/inline_if.h). One whose condition folds at compile time: the branch the
// condition picks replaces the If, its values renamed apart from the graph's, nested Ifs and their
// reads of the branch's values included. One decided at run time: both branches, guarded, the
// generated code and the reference running the one the condition names. Branches that disagree in
// type and a malformed branch are errors that name the node.
#include "frontend/passes/inline_if.h"
#include "frontend/partition/partition.h"

#include <gtest/gtest.h>

#include <set>

#include "frontend/ir/error.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

// A branch computing `out` = x op c, with c a constant of the branch (named "t", as a value of the
// main graph is: renaming must keep them apart).
ModelBuilder branch(const std::string& op, double c, const std::string& out) {
  ModelBuilder b(op + "_branch");
  b.initializer("t", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{c}));
  b.node(op, {"x", "t"}, {out});
  b.output(out, DType::Float32, Shape{});
  return b;
}

// y = If(x.shape[0] == rows) then x + 1 else x * 2, then y - t with the main graph's own t = 0.5.
ModelBuilder shape_if(int64_t rows) {
  ModelBuilder b("shape_if");
  b.input("x", DType::Float32, Shape{2, 3});
  b.initializer("zero", Tensor::scalar_int(DType::Int64, 0));
  b.initializer("rows", Tensor::scalar_int(DType::Int64, rows));
  b.initializer("t", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{0.5}));
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n"});
  b.node("Equal", {"n", "rows"}, {"cond"});
  b.node("If", {"cond"}, {"z"}, "choose").attr("then_branch", branch("Add", 1, "r")).attr("else_branch", branch("Mul", 2, "r"));
  b.node("Sub", {"z", "t"}, {"y"});
  b.output("y", DType::Float32, Shape{2, 3});
  return b;
}

// y = If(go) over x [2, 3], go a constant true, the If node named `node`.
ModelBuilder constant_if(const std::string& node, const ModelBuilder& then_branch, const ModelBuilder& else_branch) {
  ModelBuilder b(node + "_model");
  b.input("x", DType::Float32, Shape{2, 3});
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("If", {"go"}, {"y"}, node).attr("then_branch", then_branch).attr("else_branch", else_branch);
  b.output("y", DType::Float32, Shape{2, 3});
  return b;
}


std::vector<double> run(const Graph& g) {
  Tensor x = Tensor::from_doubles(DType::Float32, {2, 3}, std::vector<double>{0, 1, 2, 3, 4, 5});
  return run_reference(g, {{"x", x}}).at(0).to_doubles();
}

TEST(InlineConstantIf, AConditionOnAShapeTakesItsBranch) {
  ModelBuilder then_model = shape_if(2), else_model = shape_if(3);
  const Graph taken = testing::prepared_graph(then_model), not_taken = testing::prepared_graph(else_model);
  EXPECT_EQ(run(taken), (std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}));        // x + 1 - 0.5
  EXPECT_EQ(run(not_taken), (std::vector<double>{-0.5, 1.5, 3.5, 5.5, 7.5, 9.5}));  // x * 2 - 0.5
  for (const Graph* g : {&taken, &not_taken}) {
    for (const Node& n : g->nodes) EXPECT_NE(n.op_type, "If");
    EXPECT_EQ(g->value("t").constant->to_doubles(), (std::vector<double>{0.5}));  // the branch's t is another value
  }
}

TEST(InlineConstantIf, TheCompiledPackageComputesTheTakenBranch) {
  ModelBuilder b = shape_if(2);
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const Tensor x = Tensor::from_doubles(DType::Float32, {2, 3}, std::vector<double>{0, 1, 2, 3, 4, 5});
  const std::vector<Tensor> got = pkg.run({{"x", x}});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to_doubles(), (std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}));
}

TEST(InlineConstantIf, TheImportedGraphPrintsEachBranchUnderItsIf) {
  ModelBuilder b = shape_if(2);
  const std::string text = print_graph(import_onnx_bytes(b.serialize(), "if.onnx"));
  const size_t node = text.find("z = If(cond)  # choose"), then_at = text.find("    then_branch:\n"),
               add = text.find("      r = Add(x, t)"), else_at = text.find("    else_branch:\n"),
               mul = text.find("      r = Mul(x, t)"), sub = text.find("  y = Sub(z, t)");
  for (size_t at : {node, then_at, add, else_at, mul, sub}) ASSERT_NE(at, std::string::npos) << text;
  EXPECT_TRUE(node < else_at && else_at < mul && mul < then_at && then_at < add && add < sub) << text;  // attributes by name
  EXPECT_NE(text.find("      output r: ?"), std::string::npos) << text;
}

TEST(InlineConstantIf, ANestedIfReadsTheOuterBranchsValues) {
  // then: u = x + 1; If(true) then: v = u * 3 (u read from the outer branch) -> the If's output.
  ModelBuilder inner_then("inner_then"), inner_else("inner_else");
  inner_then.initializer("three", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{3}));
  inner_then.node("Mul", {"u", "three"}, {"v"});
  inner_then.output("v", DType::Float32, Shape{});
  inner_else.node("Neg", {"u"}, {"w"});
  inner_else.output("w", DType::Float32, Shape{});
  ModelBuilder outer_then("outer_then");
  outer_then.initializer("one", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{1}));
  outer_then.initializer("yes", Tensor::scalar_int(DType::Bool, 1));
  outer_then.node("Add", {"x", "one"}, {"u"});
  outer_then.node("If", {"yes"}, {"inner"}, "inner").attr("then_branch", inner_then).attr("else_branch", inner_else);
  outer_then.output("inner", DType::Float32, Shape{});
  ModelBuilder b = constant_if("outer", outer_then, branch("Mul", 2, "r"));
  const Graph g = testing::prepared_graph(b);
  EXPECT_EQ(run(g), (std::vector<double>{3, 6, 9, 12, 15, 18}));  // (x + 1) * 3
}

// y = If(flag) then x + 1 else x * 2, flag a graph input.
ModelBuilder data_if() {
  ModelBuilder b("data_if");
  b.input("x", DType::Float32, Shape{2, 3});
  b.input("flag", DType::Bool, Shape{});
  b.node("If", {"flag"}, {"y"}, "gate").attr("then_branch", branch("Add", 1, "r")).attr("else_branch", branch("Mul", 2, "r"));
  b.output("y", DType::Float32, Shape{2, 3});
  return b;
}

Tensor flag(bool v) { return Tensor::scalar_int(DType::Bool, v); }

TEST(RunTimeIf, EachRunTakesTheBranchItsConditionNames) {
  ModelBuilder b = data_if();
  const Graph g = testing::prepared_graph(b);
  int guarded = 0;
  for (const Node& n : g.nodes)
    if (!n.guards.empty()) {
      ++guarded;
      EXPECT_EQ(n.guards[0].cond, "flag");
      EXPECT_EQ(n.guards[0].when, n.name.rfind("gate/then/", 0) == 0) << n.name;
    }
  EXPECT_EQ(guarded, 2);
  const Tensor x = Tensor::from_doubles(DType::Float32, {2, 3}, std::vector<double>{0, 1, 2, 3, 4, 5});
  EXPECT_EQ(run_reference(g, {{"x", x}, {"flag", flag(true)}})[0].to_doubles(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_reference(g, {{"x", x}, {"flag", flag(false)}})[0].to_doubles(), (std::vector<double>{0, 2, 4, 6, 8, 10}));
}

// then: h = Relu(x) x W, then a nested If(inner) of -h or h + 1, both reading h; else: x * 2. The
// then-branch's MatMul is a tiled, vectorized loop nest inside the generated if.
ModelBuilder nested_data_if() {
  ModelBuilder inner_then("inner_then"), inner_else("inner_else"), outer_then("outer_then");
  inner_then.node("Neg", {"h"}, {"v"});
  inner_then.output("v", DType::Float32, Shape{});
  inner_else.initializer("one", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{1}));
  inner_else.node("Add", {"h", "one"}, {"w"});
  inner_else.output("w", DType::Float32, Shape{});
  outer_then.initializer("W", testing::random_weights({64, 64}, 5));
  outer_then.node("MatMul", {"rx", "W"}, {"h"});
  outer_then.node("If", {"inner"}, {"o"}, "inner_if").attr("then_branch", inner_then).attr("else_branch", inner_else);
  outer_then.output("o", DType::Float32, Shape{});
  ModelBuilder b("nested_data_if");
  b.input("x", DType::Float32, Shape{8, 64});
  b.input("outer", DType::Bool, Shape{});
  b.input("inner", DType::Bool, Shape{});
  b.node("Relu", {"x"}, {"rx"});
  b.node("If", {"outer"}, {"y"}, "outer_if").attr("then_branch", outer_then).attr("else_branch", branch("Mul", 2, "r"));
  b.output("y", DType::Float32, Shape{8, 64});
  return b;
}

TEST(RunTimeIf, TheCompiledPackageChoosesAtRunTimeAsTheReferenceDoes) {
  ModelBuilder b = nested_data_if();
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const Graph& g = pkg.graph();
  const Tensor x = testing::random_weights({8, 64}, 11);
  std::set<std::vector<double>> distinct;
  for (bool outer : {true, false})
    for (bool inner : {true, false}) {
      const std::map<std::string, Tensor> in = {{"x", x}, {"outer", flag(outer)}, {"inner", flag(inner)}};
      const std::vector<Tensor> want = run_reference(g, in);
      const std::vector<Tensor> got = pkg.run(in);
      ASSERT_EQ(got.size(), 1u);
      testing::expect_same_outputs(want, got);
      distinct.insert(want[0].to_doubles());
    }
  EXPECT_EQ(distinct.size(), 3u) << "x * 2, -(relu(x) W) and relu(x) W + 1";
}

TEST(RunTimeIf, ABranchNeverSharesASubgraphWithNodesOfAnotherGuard) {
  ModelBuilder b = nested_data_if();
  const Graph g = testing::prepared_graph(b);
  const SubgraphDAG dag = partition_graph(g);
  std::set<std::string> guards_seen;
  for (const Subgraph& sg : dag.subgraphs) {
    for (int n : sg.nodes) EXPECT_EQ(g.nodes[n].guards, sg.guards) << g.nodes[n].name;
    guards_seen.insert(guards_str(sg.guards));
  }
  // Unguarded (Relu, the merges), then, then-then, then-else, else.
  EXPECT_EQ(guards_seen, (std::set<std::string>{"", "if outer", "if outer and if inner", "if outer and if not inner", "if not outer"}));
}

// Both branches convolve the same input: the compiler's rewrites (blocked layouts here) keep each
// branch's nodes under its guard, and the input's blocked copy, which both read, under none.
TEST(RunTimeIf, RewrittenBranchesKeepTheirGuards) {
  auto conv_branch = [](const std::string& name, uint32_t seed) {
    ModelBuilder br(name);
    br.initializer("w", testing::random_weights({16, 16, 3, 3}, seed));
    br.node("Conv", {"x", "w"}, {"c"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
    br.node("Relu", {"c"}, {"r"});
    br.output("r", DType::Float32, Shape{});
    return br;
  };
  ModelBuilder b("conv_if");
  b.input("x", DType::Float32, Shape{1, 16, 8, 8});
  b.input("flag", DType::Bool, Shape{});
  b.node("If", {"flag"}, {"y"}, "gate").attr("then_branch", conv_branch("a", 1)).attr("else_branch", conv_branch("b", 2));
  b.output("y", DType::Float32, Shape{1, 16, 8, 8});
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const Graph& g = pkg.graph();
  const Graph rewritten = optimize_graph(g, 512);
  int blocked_convs = 0;
  for (const Node& n : rewritten.nodes) {
    if (n.op_type == "ConvBlocked") {
      ++blocked_convs;
      ASSERT_EQ(n.guards.size(), 1u) << n.name;
      EXPECT_EQ(n.guards[0].when, n.name.rfind("gate/then/", 0) == 0) << n.name;
    }
    if (n.op_type == "ReorderToBlocked" && n.inputs[0] == "x") {
      EXPECT_TRUE(n.guards.empty()) << n.name;
    }
  }
  EXPECT_EQ(blocked_convs, 2);
  const Tensor x = testing::random_weights({1, 16, 8, 8}, 3);
  for (bool v : {true, false}) {
    const std::map<std::string, Tensor> in = {{"x", x}, {"flag", flag(v)}};
    testing::expect_same_outputs(run_reference(g, in), pkg.run(in));
  }
}

// Silero VAD's 8 kHz branch cannot take a 16 kHz window: an error inside a branch decided at run
// time says where it is and how to compile only the branch taken.
TEST(RunTimeIf, AnErrorInsideABranchSaysWhichAndSuggestsFreezing) {
  ModelBuilder bad("bad");
  bad.initializer("shape", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{4, 4}));
  bad.node("Reshape", {"x", "shape"}, {"r"});
  bad.output("r", DType::Float32, Shape{});
  ModelBuilder b("branch_error");
  b.input("x", DType::Float32, Shape{2, 3});
  b.input("flag", DType::Bool, Shape{});
  b.node("If", {"flag"}, {"y"}, "gate").attr("then_branch", branch("Add", 1, "r")).attr("else_branch", bad);
  b.output("y", DType::Float32, Shape{2, 3});
  const std::string message = testing::prepare_error(b);
  EXPECT_NE(message.find("node 'gate/else/"), std::string::npos) << message;
  EXPECT_NE(message.find("(in a branch of an If decided at run time, if not flag; --freeze the inputs of its condition"),
            std::string::npos)
      << message;
}

TEST(RunTimeIf, BranchesOfDifferentShapesAreAnErrorNamingTheIf) {
  ModelBuilder reduce("reduce");
  reduce.node("ReduceSum", {"x"}, {"s"}).attr("keepdims", int64_t{0});
  reduce.output("s", DType::Float32, Shape{});
  ModelBuilder b("shapes_differ");
  b.input("x", DType::Float32, Shape{2, 3});
  b.input("flag", DType::Bool, Shape{});
  b.node("If", {"flag"}, {"y"}, "gate").attr("then_branch", branch("Add", 1, "r")).attr("else_branch", reduce);
  b.output("y", DType::Float32, Shape{});
  const std::string message = testing::prepare_error(b);
  EXPECT_NE(message.find("node 'gate' (If): output 'y': the two sides give float32 2x3 and float32 scalar"), std::string::npos)
      << message;
}

TEST(InlineConstantIf, ABranchWithTheWrongNumberOfOutputsIsAnError) {
  ModelBuilder two("two");
  two.node("Neg", {"x"}, {"a"});
  two.node("Abs", {"x"}, {"b"});
  two.output("a", DType::Float32, Shape{});
  two.output("b", DType::Float32, Shape{});
  ModelBuilder b = constant_if("bad", two, branch("Mul", 2, "r"));
  const std::string message = testing::prepare_error(b);
  EXPECT_NE(message.find("node 'bad' (If): then_branch has 2 outputs"), std::string::npos) << message;
}

TEST(InlineConstantIf, AnIfBeforeTheProducerOfWhatItsBranchReadsIsOrderedAfterIt) {
  // The If's branch reads `h`, produced by a node that comes after the If in the file: the importer
  // orders the If after it, as it does for a node's listed inputs.
  ModelBuilder reads_h("reads_h");
  reads_h.node("Neg", {"h"}, {"r"});
  reads_h.output("r", DType::Float32, Shape{});
  ModelBuilder b = constant_if("early", reads_h, reads_h);
  b.node("Abs", {"x"}, {"h"});
  const Graph g = testing::prepared_graph(b);
  EXPECT_EQ(run(g), (std::vector<double>{0, -1, -2, -3, -4, -5}));
}

}  // namespace
}  // namespace kiln
