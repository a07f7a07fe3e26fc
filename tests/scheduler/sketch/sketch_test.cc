// Sketches of the workloads Ansor's paper shows, printed: the rules' structure, not tile sizes.
#include <gtest/gtest.h>

#include "scheduler/sketch/sketch_rule.h"

namespace kiln {
namespace {

using namespace state;

te::TensorRef matmul(const te::TensorRef& a, const te::TensorRef& b) {
  return te::reduce("C", "matmul", DType::Float32, {a->shape[0], b->shape[1]}, te::Reducer::Sum, {a->shape[1]},
                    [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                      return te::at(a, {i[0], r[0]}) * te::at(b, {r[0], i[1]});
                    });
}

std::vector<State> sketches_of(const std::vector<te::TensorRef>& outs) {
  State s(std::make_shared<te::ComputeDAG>(te::make_dag(outs)));
  return sketch::generate_sketches(s, sketch::SearchParams{});
}

std::string all(const std::vector<State>& ss) {
  std::string out;
  for (const State& s : ss) out += "---\n" + print_steps(s) + print_state(s);
  return out;
}

TEST(Sketch, MatmulGetsCacheWriteAndPlainTiling) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  std::vector<State> ss = sketches_of({matmul(a, b)});
  EXPECT_EQ(ss.size(), 3u) << all(ss);
  std::cout << all(ss);
}

TEST(Sketch, MatmulReluFusesTheRelu) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  auto c = matmul(a, b);
  auto d = te::compute("D", "elementwise", DType::Float32, {512, 512},
                       [&](const std::vector<te::Expr>& i) { return te::max(te::at(c, i), te::float_imm(0.0)); });
  std::vector<State> ss = sketches_of({d});
  EXPECT_EQ(ss.size(), 2u) << all(ss);
  std::cout << all(ss);
}

}  // namespace
}  // namespace kiln
