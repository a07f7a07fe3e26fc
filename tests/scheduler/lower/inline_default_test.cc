// The default schedule's inlining (scheduler/lower/inline_default.h): an element-wise chain becomes
// one stage that computes what the chain did; a Transpose, a select, a producer of a reduction, one
// read twice and a subgraph output keep their stages.
#include "scheduler/lower/inline_default.h"

#include <gtest/gtest.h>

#include "scheduler/te/te_eval.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using te::Expr;
using te::int_imm;

LoweredSubgraph subgraph_of(const std::vector<te::TensorRef>& outputs, const te::TensorRef& x) {
  LoweredSubgraph sg;
  sg.dag = te::make_dag(outputs);
  sg.inputs = {{"x", x}};
  sg.outputs = outputs;
  return sg;
}

std::vector<std::string> stage_names(const te::ComputeDAG& dag) {
  std::vector<std::string> names;
  for (const te::TensorRef& t : dag.tensors) names.push_back(t->name);
  return names;
}

// The gates of an LSTM step in miniature: a slice at an offset, a sigmoid, a product with another slice.
TEST(InlineDefault, AnElementwiseChainBecomesOneStageThatComputesTheSame) {
  const te::TensorRef x = te::placeholder("x", DType::Float32, {2, 64});
  auto slice = [&](const std::string& name, int64_t offset) {
    return te::compute(name, "injective", DType::Float32, {2, 32},
                       [&](const std::vector<Expr>& i) { return te::at(x, {i[0], i[1] + int_imm(offset)}); });
  };
  const te::TensorRef a = slice("a", 0), b = slice("b", 32);
  const te::TensorRef s = te::compute("s", "elementwise", DType::Float32, {2, 32},
                                      [&](const std::vector<Expr>& i) { return te::unary(te::ExprOp::Sigmoid, te::at(a, i)); });
  const te::TensorRef y = te::compute("y", "elementwise", DType::Float32, {2, 32},
                                      [&](const std::vector<Expr>& i) { return te::at(s, i) * te::at(b, i); });
  const LoweredSubgraph sg = subgraph_of({y}, x);
  std::map<const te::TensorNode*, te::TensorRef> rebuilt;
  const LoweredSubgraph lean = lower::inline_into_readers(sg, rebuilt);
  EXPECT_EQ(stage_names(lean.dag), std::vector<std::string>{"y"});
  ASSERT_TRUE(rebuilt.count(y.get()));
  EXPECT_EQ(lean.outputs[0], rebuilt.at(y.get()));
  const Tensor in = testing::random_weights({2, 64}, 4);
  const std::vector<Tensor> want = te::evaluate(sg.dag, {{x.get(), in}});
  const std::vector<Tensor> got = te::evaluate(lean.dag, {{x.get(), in}});
  testing::expect_same_outputs(want, got);
}

TEST(InlineDefault, TransposesSelectsReductionInputsSharedStagesAndOutputsKeepTheirStages) {
  const te::TensorRef x = te::placeholder("x", DType::Float32, {8, 8});
  auto plus_one = [](const std::string& name, const te::TensorRef& in) {
    return te::compute(name, "elementwise", DType::Float32, in->shape,
                       [&](const std::vector<Expr>& i) { return te::at(in, i) + te::const_of(DType::Float32, 1); });
  };
  // A transpose read by an element-wise stage: the transpose keeps its tiled copy.
  const te::TensorRef t = te::compute("t", "injective", DType::Float32, {8, 8},
                                      [&](const std::vector<Expr>& i) { return te::at(x, {i[1], i[0]}); });
  const te::TensorRef t1 = plus_one("t1", t);
  // A select (a Concat of x with itself along the rows' halves) read by an element-wise stage.
  const te::TensorRef c = te::compute("c", "injective", DType::Float32, {8, 8}, [&](const std::vector<Expr>& i) {
    return te::select(i[1] < int_imm(4), te::at(x, {i[0], i[1]}), te::at(x, {i[0], i[1] - int_imm(4)}));
  });
  const te::TensorRef c1 = plus_one("c1", c);
  // An element-wise stage read by a reduction, and one read by two stages.
  const te::TensorRef e = plus_one("e", x);
  const te::TensorRef r = te::reduce("r", "reduction", DType::Float32, {8}, te::Reducer::Sum, {8},
                                     [&](const std::vector<Expr>& o, const std::vector<Expr>& k) { return te::at(e, {o[0], k[0]}); });
  const te::TensorRef shared = plus_one("shared", x);
  const te::TensorRef u = plus_one("u", shared), v = plus_one("v", shared);
  const LoweredSubgraph sg = subgraph_of({t1, c1, r, u, v}, x);
  std::map<const te::TensorNode*, te::TensorRef> rebuilt;
  const LoweredSubgraph lean = lower::inline_into_readers(sg, rebuilt);
  EXPECT_EQ(stage_names(lean.dag), stage_names(sg.dag));
  EXPECT_TRUE(rebuilt.empty());
}

}  // namespace
}  // namespace kiln
