// Lowering of hand-written states: each program is JIT-compiled and its outputs compared with the
// tensor-expression evaluator on random inputs. Splits that do not divide, compute-at with bound
// inference, inlining and every loop annotation must keep the result.
#include <gtest/gtest.h>

#include <random>

#include "scheduler/lower/lower_state.h"
#include "scheduler/state/steps/annotation_step.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/fuse_step.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/reorder_step.h"
#include "scheduler/state/steps/split_step.h"
#include "scheduler/te/te_eval.h"
#include "tests/scheduler/lower/lowered_error.h"
#include "tests/scheduler/lower/reshape_dag.h"

namespace kiln {
namespace {

using namespace state;
using testing::max_error;

std::shared_ptr<const te::ComputeDAG> matmul_relu(int64_t m, int64_t n, int64_t k) {
  auto a = te::placeholder("A", DType::Float32, {m, k});
  auto b = te::placeholder("B", DType::Float32, {k, n});
  auto c = te::reduce("C", "matmul", DType::Float32, {m, n}, te::Reducer::Sum, {k},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(a, {i[0], r[0]}) * te::at(b, {r[0], i[1]});
                      });
  auto d = te::compute("D", "elementwise", DType::Float32, {m, n}, [&](const std::vector<te::Expr>& i) {
    return te::max(te::at(c, i), te::float_imm(0.0));
  });
  return std::make_shared<te::ComputeDAG>(te::make_dag({d}));
}

// As the default schedule (LowerDag.AReshapeReadsItsInputAtItsOwnFlatPosition): a searched program's
// load of a whole tensor folds a Reshape's unravelled position, also after its loops are split.
TEST(LowerState, AReshapeReadsItsInputAtItsOwnFlatPosition) {
  te::TensorRef r = testing::unravelled_reshape();
  auto dag = std::make_shared<const te::ComputeDAG>(te::make_dag({r}));
  state::State s(dag);
  const std::string initial = lower::print_func(lower::lower_state_func(s, "k"));
  EXPECT_EQ(initial.find("floor"), std::string::npos) << initial;
  s.apply(std::make_shared<state::SplitStep>(1, 1, 12, std::vector<std::optional<int64_t>>{4}, true));
  const std::string split = lower::print_func(lower::lower_state_func(s, "k"));
  EXPECT_EQ(split.find("floor"), std::string::npos) << split;
  EXPECT_LT(testing::max_error(s), 1e-6);
}

TEST(LowerState, InitialStateComputesTheDag) {
  State s(matmul_relu(13, 17, 11));
  EXPECT_LT(max_error(s), 1e-4);
}

TEST(LowerState, NonDivisibleTilingWithAnnotations) {
  State s(matmul_relu(13, 37, 11));
  // C: i, j, k -> i.0 j.0 k.0 i.1 k.1 j.1 (SSRSRS-like) with remainders everywhere.
  s.apply(std::make_shared<SplitStep>(2, 0, 13, std::vector<std::optional<int64_t>>{4}));
  s.apply(std::make_shared<SplitStep>(2, 2, 37, std::vector<std::optional<int64_t>>{16}));
  s.apply(std::make_shared<SplitStep>(2, 4, 11, std::vector<std::optional<int64_t>>{3}));
  // loops: i.0 i.1 j.0 j.1 k.0 k.1
  s.apply(std::make_shared<ReorderStep>(2, std::vector<int>{0, 2, 4, 1, 5, 3}));
  s.apply(std::make_shared<AnnotationStep>(2, 0, IteratorAnnotation::Parallel));
  s.apply(std::make_shared<AnnotationStep>(2, 5, IteratorAnnotation::Vectorize));
  s.apply(std::make_shared<PragmaStep>(2, 0, "auto_unroll_max_step$16"));
  EXPECT_LT(max_error(s), 1e-4) << print_state(s);
}

TEST(LowerState, ComputeAtShrinksTheProducer) {
  State s(matmul_relu(20, 24, 9));
  // D: i, j -> i.0 j.0 i.1 j.1; C computed at D's j.0.
  s.apply(std::make_shared<SplitStep>(3, 0, 20, std::vector<std::optional<int64_t>>{8}));
  s.apply(std::make_shared<SplitStep>(3, 2, 24, std::vector<std::optional<int64_t>>{16}));
  s.apply(std::make_shared<ReorderStep>(3, std::vector<int>{0, 2, 1, 3}));
  s.apply(std::make_shared<ComputeAtStep>(2, 3, 1));
  s.apply(std::make_shared<FuseStep>(3, std::vector<int>{0, 1}));
  s.apply(std::make_shared<AnnotationStep>(3, 0, IteratorAnnotation::Parallel));
  s.apply(std::make_shared<AnnotationStep>(3, 2, IteratorAnnotation::Vectorize));
  std::string printed = print_state(s);
  EXPECT_NE(printed.find("for i0 (0,8)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("for i1 (0,16)"), std::string::npos) << printed;
  EXPECT_LT(max_error(s), 1e-4) << printed;
}

// C computed at D's j.0 with D tiled i by 8 and j by 16.
State tile_at_consumer(int64_t m, int64_t n) {
  State s(matmul_relu(m, n, 9));
  s.apply(std::make_shared<SplitStep>(3, 0, m, std::vector<std::optional<int64_t>>{8}));
  s.apply(std::make_shared<SplitStep>(3, 2, n, std::vector<std::optional<int64_t>>{16}));
  s.apply(std::make_shared<ReorderStep>(3, std::vector<int>{0, 2, 1, 3}));
  s.apply(std::make_shared<ComputeAtStep>(2, 3, 1));
  s.apply(std::make_shared<AnnotationStep>(2, 1, IteratorAnnotation::Vectorize));
  return s;
}

TEST(LowerState, TilesThatDivideTheDomainAreNotGuarded) {
  // A moving tile that cannot leave the domain needs no bounds check (which in a vector loop would
  // mean masked loads and stores); one that overshoots keeps it.
  State exact = tile_at_consumer(16, 32), ragged = tile_at_consumer(20, 24);
  const std::string exact_ir = lower::print_func(lower::lower_state_func(exact, "exact"));
  const std::string ragged_ir = lower::print_func(lower::lower_state_func(ragged, "ragged"));
  EXPECT_EQ(exact_ir.find("if ("), std::string::npos) << exact_ir;
  EXPECT_NE(ragged_ir.find("if ("), std::string::npos) << ragged_ir;
  EXPECT_LT(max_error(exact), 1e-4) << exact_ir;
  EXPECT_LT(max_error(ragged), 1e-4) << ragged_ir;
}

TEST(LowerState, InlinedElementwiseProducer) {
  auto a = te::placeholder("A", DType::Float32, {7, 9});
  auto b = te::compute("B", "elementwise", DType::Float32, {7, 9}, [&](const std::vector<te::Expr>& i) {
    return te::at(a, i) * te::float_imm(2.0);
  });
  auto c = te::reduce("C", "reduction", DType::Float32, {7}, te::Reducer::Sum, {9},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) { return te::at(b, {i[0], r[0]}); });
  State s(std::make_shared<te::ComputeDAG>(te::make_dag({c})));
  s.apply(std::make_shared<ComputeInlineStep>(1));
  s.apply(std::make_shared<SplitStep>(2, 1, 9, std::vector<std::optional<int64_t>>{4}));
  EXPECT_LT(max_error(s), 1e-4) << print_state(s);
}

}  // namespace
}  // namespace kiln
