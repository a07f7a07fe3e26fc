// In-place Concats (scheduler/lower/in_place_concat.h): which Concats qualify, where their inputs land
// in the memory plan, and that a package computing a concat of a concat in place still matches the
// reference interpreter; a run-time If's merge whose branches write one buffer, likewise.
#include "scheduler/lower/in_place_concat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/package/memory_plan.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/lower/lower_model.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_package.h"

namespace kiln {
namespace {

using testing::random_weights;

void conv(ModelBuilder& b, const std::string& x, const std::string& y, int64_t in, int64_t out, int64_t k, uint32_t seed) {
  b.initializer(y + ".w", random_weights({out, in, k, k}, seed));
  b.node("Conv", {x, y + ".w"}, {y}).attr("pads", std::vector<int64_t>(4, (k - 1) / 2));
}

// DenseNet's pattern: a = conv(x), b = conv(a), cat1 = [a, b], c = conv(cat1), cat2 = [cat1, c],
// then an Identity (an inference Dropout) and a conv to the output. `batch` and `channels` size x.
ModelBuilder dense_block(int64_t batch = 1, int64_t channels = 16) {
  ModelBuilder b("dense");
  const int64_t n = channels;
  b.input("x", DType::Float32, Shape{batch, n, 8, 8});
  conv(b, "x", "a", n, n, 3, 1);
  conv(b, "a", "b", n, n, 3, 2);
  b.node("Concat", {"a", "b"}, {"cat1"}).attr("axis", int64_t{1});
  conv(b, "cat1", "c", 2 * n, n, 1, 3);
  b.node("Concat", {"cat1", "c"}, {"cat2"}).attr("axis", int64_t{1});
  b.node("Identity", {"cat2"}, {"drop"});
  conv(b, "drop", "y", 3 * n, 8, 1, 4);
  b.output("y", DType::Float32, Shape{batch, 8, 8, 8});
  return b;
}

std::vector<lower::InPlaceConcat> plans_of(ModelBuilder& b, int vector_bits, Graph* optimized = nullptr) {
  const Graph g = optimize_graph(testing::prepared_graph(b), vector_bits);
  auto plans = lower::plan_in_place_concats(g, partition_graph(g));
  if (optimized) *optimized = g;
  return plans;
}

TEST(InPlaceConcat, AConcatOfAConcatLiesWithinTheLastOne) {
  ModelBuilder b = dense_block();
  const auto plans = plans_of(b, 512);  // blocked: [1, C/16, 8, 8, 16]
  ASSERT_EQ(plans.size(), 2u);
  ASSERT_EQ(plans[0].inputs.size(), 2u);
  EXPECT_EQ(plans[0].inputs[1].offset, 16 * 64 * 4);  // b after a's 16 channels of 8x8 floats
  ASSERT_EQ(plans[1].inputs.size(), 2u);
  EXPECT_EQ(plans[1].inputs[0].value, plans[0].output);  // cat1 within cat2 ...
  EXPECT_EQ(plans[1].inputs[0].offset, 0);
  EXPECT_EQ(plans[1].inputs[1].offset, 32 * 64 * 4);
  EXPECT_NE(plans[1].output, plans[1].inputs[0].value);  // ... and cat2 is the Identity's output
}

TEST(InPlaceConcat, MemoryPlanPutsEveryInputAtItsOffsetInTheOutermostBuffer) {
  ModelBuilder b = dense_block();
  Graph g;
  const auto plans = plans_of(b, 512, &g);
  const SubgraphDAG sdag = partition_graph(g);
  const lower::ModelProgram with = lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}), plans);
  const lower::ModelProgram without = lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}));
  EXPECT_LT(with.func.body->body.size(), without.func.body->body.size());  // the Concats run nothing
  const package::ModelMemoryPlan m = package::plan_model_memory(with);
  std::map<std::string, int64_t> offset;
  for (size_t i = 0; i < with.params.size(); ++i) offset[with.func.params[i]->name] = m.offset_of_param[i];
  const int64_t outer = offset.at(plans[1].output);
  EXPECT_EQ(offset.at(plans[1].inputs[0].value), outer);
  EXPECT_EQ(offset.at(plans[0].inputs[0].value), outer);
  EXPECT_EQ(offset.at(plans[0].inputs[1].value), outer + plans[0].inputs[1].offset);
  EXPECT_EQ(offset.at(plans[1].inputs[1].value), outer + plans[1].inputs[1].offset);
  // Only the outermost buffer takes bytes of its own: four fewer buffers to place, and a fifth (the
  // copy the Identity made of cat2) is gone with the Concats' statements.
  EXPECT_EQ(m.intermediates + 5, package::plan_model_memory(without).intermediates)
      << lower::print_model_params(with) << "\n" << lower::print_model_params(without);
}

TEST(InPlaceConcat, PackageMatchesTheReferenceInterpreter) {
  for (int64_t channels : {16, 24}) {  // whole blocks; 24 channels keep NCHW concats
    SCOPED_TRACE(channels);
    ModelBuilder b = dense_block(1, channels);
    testing::TempDir dir;
    b.save(dir.path("m.onnx"));
    const Graph g = load_model(dir.path("m.onnx"), PipelineOptions{});
    std::map<std::string, Tensor> in{{"x", random_weights({1, channels, 8, 8}, 9)}};
    CompileOptions c;
    c.target = resolve_target("host");
    compile_graph(g, c, dir.path("pkg"));
    const std::vector<Tensor> got = run_package(dir.path("pkg"), c.target, in, 1).outputs;
    const std::vector<Tensor> want = run_reference(g, in);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].size(), want[0].size());
    for (int64_t i = 0; i < got[0].size(); ++i)
      ASSERT_NEAR(got[0].get_double(i), want[0].get_double(i), 1e-4 + 1e-4 * std::fabs(want[0].get_double(i))) << i;
  }
}

TEST(InPlaceConcat, ConcatsThatCannotAreLeftAlone) {
  {  // batch 2: each input is two runs of the output
    ModelBuilder b = dense_block(2);
    EXPECT_TRUE(plans_of(b, 512).empty());
  }
  {  // an input that is a graph input, or listed twice, or an output that is a graph output
    for (const std::vector<std::string>& ins : {std::vector<std::string>{"x", "a"}, std::vector<std::string>{"a", "a"}}) {
      ModelBuilder b("m");
      b.input("x", DType::Float32, Shape{1, 16, 4, 4});
      conv(b, "x", "a", 16, 16, 3, 1);
      b.node("Concat", ins, {"cat"}).attr("axis", int64_t{1});
      conv(b, "cat", "y", 32, 8, 1, 2);
      b.output("y", DType::Float32, Shape{1, 8, 4, 4});
      EXPECT_TRUE(plans_of(b, 0).empty()) << ins[0] << ins[1];
    }
    ModelBuilder b("m");
    b.input("x", DType::Float32, Shape{1, 16, 4, 4});
    conv(b, "x", "a", 16, 16, 3, 1);
    conv(b, "x", "b", 16, 16, 3, 2);
    b.node("Concat", {"a", "b"}, {"y"}).attr("axis", int64_t{1});
    b.output("y", DType::Float32, Shape{1, 32, 4, 4});
    EXPECT_TRUE(plans_of(b, 512).empty());
  }
  {  // NCHW with 3x3 planes of one channel: the second input would start at byte 36
    ModelBuilder b("m");
    b.input("x", DType::Float32, Shape{1, 2, 3, 3});
    conv(b, "x", "a", 2, 1, 3, 1);
    conv(b, "x", "b", 2, 1, 3, 2);
    b.node("Concat", {"a", "b"}, {"cat"}).attr("axis", int64_t{1});
    conv(b, "cat", "y", 2, 2, 1, 3);
    b.output("y", DType::Float32, Shape{1, 2, 3, 3});
    EXPECT_TRUE(plans_of(b, 0).empty());
  }
}

// A branch: `out` = conv(x) op c.
ModelBuilder conv_branch(const std::string& op, uint32_t seed) {
  ModelBuilder b(op + "_branch");
  conv(b, "x", "t", 8, 8, 3, seed);
  b.initializer("c", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{0.5}));
  b.node(op, {"t", "c"}, {"out"});
  b.output("out", DType::Float32, Shape{1, 8, 6, 6});
  return b;
}

// y = conv(If(go) then conv(x) + 0.5 else conv(x) * 0.5), go decided at run time: the merge feeds a conv.
ModelBuilder runtime_if_into_conv() {
  ModelBuilder b("if_merge");
  b.input("go", DType::Bool, Shape{});
  b.input("x", DType::Float32, Shape{1, 8, 6, 6});
  b.node("If", {"go"}, {"z"}, "choose").attr("then_branch", conv_branch("Add", 5)).attr("else_branch", conv_branch("Mul", 6));
  conv(b, "z", "y", 8, 4, 1, 7);
  b.output("y", DType::Float32, Shape{1, 4, 6, 6});
  return b;
}

TEST(InPlaceConcat, ARunTimeIfsBranchesWriteTheMergesBufferAndTheMergeRunsNothing) {
  ModelBuilder b = runtime_if_into_conv();
  const Graph g = optimize_graph(testing::prepared_graph(b), 0);
  const SubgraphDAG sdag = partition_graph(g);
  const auto plans = lower::plan_in_place_if_merges(g, sdag, {});
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].output, "z");
  ASSERT_EQ(plans[0].inputs.size(), 2u);
  EXPECT_EQ(plans[0].inputs[0].offset, 0);
  EXPECT_EQ(plans[0].inputs[1].offset, 0);
  const lower::ModelProgram with = lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}), plans);
  const lower::ModelProgram without = lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}));
  EXPECT_LT(package::plan_model_memory(with).size, package::plan_model_memory(without).size);

  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  for (int go : {1, 0}) {
    const std::map<std::string, Tensor> in = {{"go", Tensor::scalar_int(DType::Bool, go)}, {"x", random_weights({1, 8, 6, 6}, 9)}};
    testing::expect_same_outputs(run_reference(pkg.graph(), in), pkg.run(in));
  }
}

TEST(InPlaceConcat, AMergeOfAValueFromOutsideItsBranchKeepsItsOwnBuffer) {
  // The else branch gives x2, which is computed before the If and read after it: the then branch
  // must not write over it.
  ModelBuilder pass("pass");
  pass.output("x2", DType::Float32, Shape{1, 8, 6, 6});
  ModelBuilder b("if_merge");
  b.input("go", DType::Bool, Shape{});
  b.input("x", DType::Float32, Shape{1, 8, 6, 6});
  conv(b, "x", "x2", 8, 8, 3, 3);
  b.node("If", {"go"}, {"z"}, "choose").attr("then_branch", conv_branch("Add", 5)).attr("else_branch", pass);
  b.node("Add", {"z", "x2"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 8, 6, 6});
  const Graph g = optimize_graph(testing::prepared_graph(b), 0);
  EXPECT_TRUE(std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
    return n.op_type == "IfMerge" && n.inputs.size() == 3 && n.inputs[2] == "x2";
  }));
  EXPECT_TRUE(lower::plan_in_place_if_merges(g, partition_graph(g), {}).empty());
}

}  // namespace
}  // namespace kiln
