// LSTM, GRU and RNN expanded into MatMuls and element-wise steps (frontend/passes/expand_recurrent.h):
// the expansion must compute what the reference kernel computes (one batch row at a time, its own
// formulation) in every direction, layout and option the spec has, and compile into a package that
// does too; with constant weights, only the projections and the step MatMuls stay at run time.
#include "frontend/passes/expand_recurrent.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "frontend/ir/step_loop.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::RecurrentModel;

// The model's inputs: X at random, sequence_lens (when an input) as the model says.
std::map<std::string, Tensor> inputs_of(const RecurrentModel& m, const Graph& g) {
  std::map<std::string, Tensor> in = {{"X", testing::random_weights(g.value("X").shape, 9)}};
  if (m.lens_input) in["sequence_lens"] = Tensor::from_ints(DType::Int32, {m.batch}, m.sequence_lens);
  return in;
}

// Expands the model's node, unrolled and as StepLoops, and compares the reference interpreter before
// and after.
void expect_expansion_matches(const RecurrentModel& m) {
  for (const bool roll : {false, true}) {
    SCOPED_TRACE(roll ? "steps as a StepLoop" : "steps unrolled");
    ModelBuilder b = testing::recurrent_model(m);
    Graph g = testing::prepared_graph(b);
    const std::map<std::string, Tensor> in = inputs_of(m, g);
    const std::vector<Tensor> before = run_reference(g, in);
    ASSERT_EQ(expand_recurrent(g, {.roll_steps = roll}), 1);
    remove_dead_nodes(g);
    int loops = 0;
    for (const Node& n : g.nodes) {
      ASSERT_NE(n.op_type, m.op) << "the node is still there";
      loops += is_step_loop(n);
    }
    EXPECT_EQ(loops, roll ? (m.direction == "bidirectional" ? 2 : 1) : 0);
    testing::expect_same_outputs(before, run_reference(g, in));
  }
}

TEST(ExpandRecurrent, BidirectionalLstmWithPeepholesAndShortRows) {
  RecurrentModel m;
  m.direction = "bidirectional";
  m.peepholes = true;
  m.sequence_lens = {3, 1};
  expect_expansion_matches(m);
}

TEST(ExpandRecurrent, ReverseBatchFirstLstmWithRunTimeLengthsAndAnEmptyRow) {
  RecurrentModel m;
  m.direction = "reverse";
  m.layout = 1;
  m.batch = 3;
  m.sequence_lens = {2, 0, 3};
  m.lens_input = true;
  expect_expansion_matches(m);
}

TEST(ExpandRecurrent, LstmWithCoupledGatesClipAndParameterisedActivations) {
  RecurrentModel m;
  m.peepholes = true;
  m.attrs = [](ModelBuilder::NodeRef& n) {
    n.attr("input_forget", int64_t{1}).attr("clip", 0.5);
    n.attr("activations", std::vector<std::string>{"HardSigmoid", "LeakyRelu", "Affine"});
    n.attr("activation_alpha", std::vector<double>{0.3, 0.2, 0.7}).attr("activation_beta", std::vector<double>{0.4, -0.1});
  };
  expect_expansion_matches(m);
}

TEST(ExpandRecurrent, BidirectionalGruLinearBeforeReset) {
  RecurrentModel m;
  m.op = "GRU";
  m.direction = "bidirectional";
  m.sequence_lens = {2, 3};
  m.attrs = [](ModelBuilder::NodeRef& n) { n.attr("linear_before_reset", int64_t{1}); };
  expect_expansion_matches(m);
}

TEST(ExpandRecurrent, ReverseBatchFirstGruWithScaledTanh) {
  RecurrentModel m;
  m.op = "GRU";
  m.direction = "reverse";
  m.layout = 1;
  m.attrs = [](ModelBuilder::NodeRef& n) {
    n.attr("activations", std::vector<std::string>{"Sigmoid", "ScaledTanh"});
    n.attr("activation_alpha", std::vector<double>{1.5}).attr("activation_beta", std::vector<double>{0.5});
  };
  expect_expansion_matches(m);
}

TEST(ExpandRecurrent, BidirectionalRnnWithOwnActivationsPerDirectionAndNoBiasOrState) {
  RecurrentModel m;
  m.op = "RNN";
  m.direction = "bidirectional";
  m.bias = false;
  m.initial_state = false;
  m.attrs = [](ModelBuilder::NodeRef& n) {
    n.attr("activations", std::vector<std::string>{"Relu", "Elu"}).attr("clip", 0.8);
  };
  expect_expansion_matches(m);
}

// With constant weights every transpose, slice and bias sum folds: per direction one projection
// MatMul and one MatMul per step remain, but the first step's, whose state is the constant initial one.
TEST(ExpandRecurrent, ConstantWeightsLeaveOnlyTheProjectionAndStepMatMuls) {
  RecurrentModel m;
  m.direction = "bidirectional";
  m.seq = 4;
  ModelBuilder b = testing::recurrent_model(m);
  Graph g = testing::prepared_graph(b);
  expand_recurrent(g);
  remove_dead_nodes(g);
  const std::vector<std::string> ops = testing::op_types(g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMul"), 2 * (1 + 3));
  for (const char* folded : {"Gather", "Where", "Less"}) EXPECT_EQ(std::count(ops.begin(), ops.end(), folded), 0) << folded;
  for (const Node& n : g.nodes) {
    if (n.op_type == "Transpose") {
      EXPECT_EQ(n.inputs[0], "X") << "only a batch-first X is transposed at run time";
    }
  }
}

// As StepLoops, the weights a step reads are constants of the loop's body (so the body's layout pass
// packs them), and only the projection and the initial states enter the loop from outside.
TEST(ExpandRecurrent, AStepLoopsBodyHoldsItsWeights) {
  RecurrentModel m;
  m.peepholes = true;
  ModelBuilder b = testing::recurrent_model(m);
  Graph g = testing::prepared_graph(b);
  expand_recurrent(g, {.roll_steps = true});
  remove_dead_nodes(g);
  int loops = 0;
  for (const Node& n : g.nodes) {
    if (!is_step_loop(n)) continue;
    ++loops;
    const StepLoop loop = read_step_loop(n);
    EXPECT_EQ(loop.trip_count, m.seq);
    EXPECT_EQ(n.inputs.size(), 3u) << "h0, c0 and the projection";
    int matmuls = 0;
    for (const Node& part : loop.body->nodes) matmuls += part.op_type == "MatMul";
    EXPECT_EQ(matmuls, 1) << "one step's R^T product";
  }
  EXPECT_EQ(loops, 1);
}

// The steps run in a loop: the package's code does not grow with the sequence (unrolled, 500 steps
// were 4.6 times 50 steps' bytes).
TEST(ExpandRecurrent, TheCodeDoesNotGrowWithTheSequence) {
  auto library_bytes = [](int64_t seq) {
    RecurrentModel m;
    m.seq = seq;
    m.hidden = 16;
    ModelBuilder b = testing::recurrent_model(m);
    testing::TempDir dir;
    const testing::HostPackage pkg(b, dir);
    for (const auto& e : std::filesystem::directory_iterator(dir.path("pkg")))
      if (e.path().extension() == ".a") return static_cast<int64_t>(e.file_size());
    return int64_t{0};
  };
  const int64_t short_seq = library_bytes(50), long_seq = library_bytes(500);
  ASSERT_GT(short_seq, 0);
  EXPECT_LT(std::abs(long_seq - short_seq), short_seq / 20) << short_seq << " vs " << long_seq << " bytes";
}

TEST(ExpandRecurrent, TheCompiledPackageMatchesTheReference) {
  RecurrentModel m;
  m.direction = "bidirectional";
  m.peepholes = true;
  m.batch = 3;
  m.hidden = 16;
  m.sequence_lens = {3, 1, 2};
  m.lens_input = true;
  ModelBuilder b = testing::recurrent_model(m);
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const std::map<std::string, Tensor> in = inputs_of(m, pkg.graph());
  const std::vector<Tensor> want = run_reference(pkg.graph(), in);
  // Every step's MatMul reads R^T in the layout the kernel packs it into: one copy per direction in
  // the package (4 KiB each), not one per step that multiplies at run time (two per direction: the
  // first step's state is the constant initial one). The model's W, R, B and P are 11.4 KiB.
  EXPECT_LT(pkg.info().weights_bytes, 14 * 1024) << pkg.info().weights_bytes;
  const std::vector<Tensor> got = pkg.run(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape());
    for (int64_t i = 0; i < got[o].size(); ++i)
      EXPECT_NEAR(got[o].get_double(i), want[o].get_double(i), 1e-5 + 1e-4 * std::abs(want[o].get_double(i)))
          << "output " << o << " element " << i;
  }
}

}  // namespace
}  // namespace kiln
