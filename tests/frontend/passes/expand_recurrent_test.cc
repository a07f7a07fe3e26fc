// LSTM, GRU and RNN expanded into MatMuls and element-wise steps (frontend/passes/expand_recurrent.h):
// the expansion must compute what the reference kernel computes (one batch row at a time, its own
// formulation) in every direction, layout and option the spec has, and compile into a package that
// does too; with constant weights, only the projections and the step MatMuls stay at run time.
#include "frontend/passes/expand_recurrent.h"

#include <gtest/gtest.h>

#include <algorithm>

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

// Expands the model's node and compares the reference interpreter before and after.
void expect_expansion_matches(const RecurrentModel& m) {
  ModelBuilder b = testing::recurrent_model(m);
  Graph g = testing::prepared_graph(b);
  const std::map<std::string, Tensor> in = inputs_of(m, g);
  const std::vector<Tensor> before = run_reference(g, in);
  ASSERT_EQ(expand_recurrent(g), 1);
  remove_dead_nodes(g);
  for (const Node& n : g.nodes) ASSERT_NE(n.op_type, m.op) << "the node is still there";
  testing::expect_same_outputs(before, run_reference(g, in));
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
