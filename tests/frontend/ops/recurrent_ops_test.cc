// LSTM, GRU and RNN in the reference interpreter (frontend/ops/recurrent_ops.cc): what the ONNX node
// tests leave out (a row of length 0, rows per direction), and the errors that name the node and the
// input or attribute that is wrong.
#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::RecurrentModel;

std::string error_of(const RecurrentModel& m) {
  ModelBuilder b = testing::recurrent_model(m);
  return testing::prepare_error(b);
}

// A row of length 0 runs no step: its outputs are zeros and its final state the initial one. A
// reverse direction's row of length L writes steps L-1 .. 0 and nothing after them.
TEST(RecurrentOps, RowsRunTheirOwnLengthInEachDirection) {
  RecurrentModel m;
  m.op = "RNN";
  m.direction = "bidirectional";
  m.sequence_lens = {0, 2};
  ModelBuilder b = testing::recurrent_model(m);
  const Graph g = testing::prepared_graph(b);
  const Tensor x = testing::random_weights(g.value("X").shape, 3);
  const std::vector<Tensor> out = run_reference(g, {{"X", x}});
  const Tensor& y = out[0];  // [seq 3, dirs 2, batch 2, hidden 5]
  const Tensor h0 = *g.value("initial_h").constant;
  auto y_at = [&](int64_t t, int64_t d, int64_t b, int64_t j) { return y.get_double(((t * 2 + d) * 2 + b) * 5 + j); };
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t j = 0; j < 5; ++j) {
      for (int64_t t = 0; t < 3; ++t) EXPECT_EQ(y_at(t, d, 0, j), 0.0) << "row 0 has length 0";
      EXPECT_EQ(y_at(2, d, 1, j), 0.0) << "row 1 has length 2";
      EXPECT_NE(y_at(0, d, 1, j), 0.0);
      EXPECT_EQ(out[1].get_double((d * 2 + 0) * 5 + j), h0.get_double((d * 2 + 0) * 5 + j)) << "row 0 keeps its state";
    }
  // Forward ends at t = 1, reverse at t = 0: Y_h is the step each direction wrote last.
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(out[1].get_double((0 * 2 + 1) * 5 + j), y_at(1, 0, 1, j));
    EXPECT_EQ(out[1].get_double((1 * 2 + 1) * 5 + j), y_at(0, 1, 1, j));
  }
}

TEST(RecurrentOps, AWeightOfTheWrongShapeIsNamed) {
  RecurrentModel m;
  m.hidden_size_attr = 6;
  const std::string e = error_of(m);
  EXPECT_NE(e.find("node 'cell' (LSTM)"), std::string::npos) << e;
  EXPECT_NE(e.find("input 'W' has shape 1x20x4, expected 1x24x4"), std::string::npos) << e;
}

TEST(RecurrentOps, AnUnknownActivationIsNamed) {
  RecurrentModel m;
  m.op = "GRU";
  m.attrs = [](ModelBuilder::NodeRef& n) { n.attr("activations", std::vector<std::string>{"Sigmoid", "Swish"}); };
  const std::string e = error_of(m);
  EXPECT_NE(e.find("node 'cell' (GRU): attribute 'activations': unknown function 'Swish'"), std::string::npos) << e;
}

TEST(RecurrentOps, ActivationsMustCoverEveryDirection) {
  RecurrentModel m;
  m.direction = "bidirectional";
  m.attrs = [](ModelBuilder::NodeRef& n) { n.attr("activations", std::vector<std::string>{"Sigmoid", "Tanh"}); };
  const std::string e = error_of(m);
  EXPECT_NE(e.find("attribute 'activations' has 2 functions, expected 3 per direction"), std::string::npos) << e;
}

TEST(RecurrentOps, ALengthOutsideTheSequenceIsAnErrorAtRunTime) {
  RecurrentModel m;
  m.sequence_lens = {1, 4};
  m.lens_input = true;
  ModelBuilder b = testing::recurrent_model(m);
  const Graph g = testing::prepared_graph(b);
  const Tensor x = testing::random_weights(g.value("X").shape, 3);
  const Tensor lens = Tensor::from_ints(DType::Int32, {2}, std::vector<int64_t>{1, 4});
  try {
    run_reference(g, {{"X", x}, {"sequence_lens", lens}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_lens[1] is 4, outside 0..3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
