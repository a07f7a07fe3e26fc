// In-place Slices and reshapes (scheduler/lower/in_place_concat.h, plan_in_place_slices) and the blocked Slice of
// the layout stage: a merged conv split back into its parts (frontend/subst) runs no copy when each
// part is one contiguous run of the whole, and the package still matches the reference interpreter;
// Slices that cannot be in place are left alone.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/package/memory_plan.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/reference/interpreter.h"
#include "frontend/zoo/zoo.h"
#include "scheduler/lower/in_place_concat.h"
#include "scheduler/lower/lower_model.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

using testing::random_weights;

// x [batch, 16, 8, 8] -> conv (48 channels) -> Slice [0, 16) and [16, 48) on channels (or at `cut`)
// -> a conv each -> added: the shape of two merged convs split back.
ModelBuilder split_conv(int64_t batch = 1, int64_t cut = 16) {
  ModelBuilder b("split_conv");
  b.input("x", DType::Float32, Shape{batch, 16, 8, 8});
  b.initializer("w", random_weights({48, 16, 3, 3}, 1));
  b.node("Conv", {"x", "w"}, {"merged"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  auto ints = [&](const std::string& name, int64_t v) { b.initializer(name, Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{v})); };
  ints("zero", 0);
  ints("cut", cut);
  ints("end", 48);
  ints("axis", 1);
  b.node("Slice", {"merged", "zero", "cut", "axis"}, {"first"});
  b.node("Slice", {"merged", "cut", "end", "axis"}, {"second"});
  b.initializer("w1", random_weights({8, cut, 1, 1}, 2));
  b.initializer("w2", random_weights({8, 48 - cut, 1, 1}, 3));
  b.node("Conv", {"first", "w1"}, {"y1"});
  b.node("Conv", {"second", "w2"}, {"y2"});
  b.node("Add", {"y1", "y2"}, {"y"});
  b.output("y", DType::Float32, Shape{batch, 8, 8, 8});
  return b;
}

std::vector<lower::InPlaceConcat> slice_plans(ModelBuilder& b, int vector_bits, Graph* optimized = nullptr) {
  const Graph g = optimize_graph(testing::prepared_graph(b), vector_bits);
  const SubgraphDAG sdag = partition_graph(g);
  auto plans = lower::plan_in_place_slices(g, sdag, lower::plan_in_place_concats(g, sdag));
  if (optimized) *optimized = g;
  return plans;
}

TEST(InPlaceSlice, APartOfAMergedConvLiesWithinIt) {
  ModelBuilder b = split_conv();
  Graph g;
  const auto plans = slice_plans(b, 512, &g);  // blocked: [1, 3, 8, 8, 16], cut at block 1
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].output, plans[1].output);  // both within the conv's output
  EXPECT_EQ(plans[0].inputs[0].offset, 0);
  EXPECT_EQ(plans[1].inputs[0].offset, 16 * 64 * 4);  // after the first 16 channels of 8x8 floats
  // The Slices are blocked ones: no reorder out of the blocks around them.
  EXPECT_EQ(std::count_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op_type == "ReorderFromBlocked"; }), 1);
  const SubgraphDAG sdag = partition_graph(g);
  const auto all = lower::plan_in_place_outputs(g, sdag);
  const lower::ModelProgram with = lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}), all);
  const lower::ModelProgram without = lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}));
  EXPECT_LT(with.func.body->body.size(), without.func.body->body.size());  // the Slices run nothing
  EXPECT_LT(package::plan_model_memory(with).size, package::plan_model_memory(without).size);
}

TEST(InPlaceSlice, SlicesThatAreNoContiguousRunAreLeftAlone) {
  ModelBuilder batch2 = split_conv(2);  // batch 2: each part is two runs
  EXPECT_TRUE(slice_plans(batch2, 512).empty());
  EXPECT_TRUE(slice_plans(batch2, 0).empty());
  // In NCHW at batch 1 a cut at channel 8 is one run (8 planes of 64 floats in).
  ModelBuilder mid_block = split_conv(1, 8);
  const auto nchw = slice_plans(mid_block, 0);
  ASSERT_EQ(nchw.size(), 2u);
  EXPECT_EQ(nchw[1].inputs[0].offset, 8 * 64 * 4);
}

TEST(InPlaceSlice, PackageMatchesTheReferenceInterpreter) {
  for (int64_t cut : {16, 8}) {
    SCOPED_TRACE(cut);
    ModelBuilder b = split_conv(1, cut);
    testing::TempDir dir;
    const testing::HostPackage pkg(b, dir);
    const std::map<std::string, Tensor> in{{"x", random_weights({1, 16, 8, 8}, 9)}};
    testing::expect_same_outputs(run_reference(pkg.graph(), in), pkg.run(in));
  }
}

// A reshape alone in its subgraph is a view: an LSTM's stacked steps (a StepLoop's output) reshaped
// into Y's layout are the loop's own buffer, and the package still matches the reference.
TEST(InPlaceSlice, AReshapeOfALoopsOutputIsAView) {
  testing::RecurrentModel m;
  m.seq = 40;
  m.hidden = 16;
  ModelBuilder b = testing::recurrent_model(m);
  Graph g;
  const auto plans = slice_plans(b, 512, &g);
  int views = 0;
  for (const lower::InPlaceConcat& p : plans)
    for (const Node& n : g.nodes)
      if (n.outputs[0] == p.inputs[0].value && n.op_type == "Reshape") {
        ++views;
        EXPECT_EQ(p.inputs[0].offset, 0);
        EXPECT_EQ(p.output, n.inputs[0]);
      }
  EXPECT_GE(views, 1);
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const std::map<std::string, Tensor> in = {{"X", random_weights(pkg.graph().value("X").shape, 5)}};
  testing::expect_same_outputs(run_reference(pkg.graph(), in), pkg.run(in));
}

// A chain of reshapes fused into one subgraph is a view as well: lstm_kws's first LSTM's stacked
// steps reach the second LSTM's projection through a Reshape, Y's Identity, a Squeeze and a Reshape.
TEST(InPlaceSlice, AChainOfReshapesIsAView) {
  ZooOptions o;
  o.seq = 8;
  ModelBuilder b = build_zoo_model("lstm_kws", o);
  Graph g;
  const auto plans = slice_plans(b, 512, &g);
  bool found = false;
  for (const lower::InPlaceConcat& p : plans)
    if (p.inputs[0].value == "lstm2/Reshape") {
      found = true;
      EXPECT_EQ(p.output, "lstm1/steps");
      EXPECT_EQ(p.inputs[0].offset, 0);
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace kiln
