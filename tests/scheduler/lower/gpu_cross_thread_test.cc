// Cross-thread reductions on the GPU (scheduler/lower/gpu_cross_thread.h): which stages take them and
// with how many lanes, and that their kernels, run thread after thread on the CPU (JIT), compute what
// the evaluator computes: a LayerNorm-like mean with its epilogue, a max whose outputs and terms the
// lanes and blocks do not divide, a reduction over two axes whose initial value is not the identity.
#include <gtest/gtest.h>

#include "scheduler/lower/gpu_cross_thread.h"
#include "tests/scheduler/lower/gpu_stage_kernel.h"
#include "tests/scheduler/lower/lowered_error.h"

namespace kiln {
namespace {

using te::Expr;
using te::int_imm;

te::TensorRef row_reduction(const std::string& tag, te::Reducer r, int64_t rows, int64_t terms, Expr init = nullptr) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {rows, terms});
  return te::reduce("red", tag, DType::Float32, {rows}, r, {terms},
                    [&](const std::vector<Expr>& o, const std::vector<Expr>& k) { return te::at(x, {o[0], k[0]}); }, init);
}

TEST(GpuCrossThread, FewOutputsOfLongReductionsTakeLanesAndTheRestDoNot) {
  const lower::GpuScheduleParams p;
  EXPECT_EQ(lower::cross_thread_lanes(*row_reduction("reduction", te::Reducer::Sum, 128, 768)->stage, p), 32);
  EXPECT_EQ(lower::cross_thread_lanes(*row_reduction("reduction", te::Reducer::Max, 4, 100000)->stage, p), 256);
  EXPECT_EQ(lower::cross_thread_lanes(*row_reduction("reduction", te::Reducer::Sum, 128, 32)->stage, p), 0);      // short
  EXPECT_EQ(lower::cross_thread_lanes(*row_reduction("reduction", te::Reducer::Sum, 1 << 20, 768)->stage, p), 0);  // many outputs
  EXPECT_EQ(lower::cross_thread_lanes(*row_reduction("matmul", te::Reducer::Sum, 128, 768)->stage, p), 0);  // shared tiles' work
}

TEST(GpuCrossThread, KernelsRunThreadAfterThreadComputeWhatTheEvaluatorComputes) {
  lower::GpuScheduleParams p;
  p.multiprocessors = 4;  // several outputs per block, and blocks whose last outputs are missing
  struct Case {
    const char* name;
    te::TensorRef out;
    int64_t lanes;
  };
  te::TensorRef x3 = te::placeholder("x3", DType::Float32, {5, 6, 50});
  const std::vector<Case> cases = {
      {"sum of 768", row_reduction("reduction", te::Reducer::Sum, 16, 768), 32},
      {"max, 37 rows of 100 over 64 lanes", row_reduction("reduction", te::Reducer::Max, 37, 100), 64},
      {"sum over two axes from 1.5", te::reduce("two", "reduction", DType::Float32, {5}, te::Reducer::Sum, {6, 50},
                                               [&](const std::vector<Expr>& o, const std::vector<Expr>& k) {
                                                 return te::at(x3, {o[0], k[0], k[1]});
                                               }, te::const_of(DType::Float32, 1.5)), 8},
  };
  for (const Case& c : cases) {
    const lower::LoweredFunc f = testing::gpu_stage_kernel(c.out, [&](const auto& buffers) {
      return lower::lower_stage_gpu_cross_thread(c.out, c.lanes, buffers, p, nullptr);
    });
    EXPECT_LT(testing::max_error(f, te::make_dag({c.out})), 1e-3) << c.name << "\n" << lower::print_func(f);
  }
}

TEST(GpuCrossThread, TheEpilogueIsAppliedOnceByTheFirstLane) {
  const te::TensorRef sum = row_reduction("reduction", te::Reducer::Sum, 16, 768);
  te::TensorRef mean = te::compute("mean", "elementwise", DType::Float32, {16}, [&](const std::vector<Expr>& i) {
    return te::at(sum, i) / te::const_of(DType::Float32, 768);
  });
  const Expr value = te::var("v", DType::Float32);
  const lower::Epilogue e{mean, value, value / te::const_of(DType::Float32, 768)};
  const lower::LoweredFunc f = testing::gpu_stage_kernel(mean, [&](const auto& buffers) {
    return lower::lower_stage_gpu_cross_thread(sum, 32, buffers, {}, &e);
  });
  EXPECT_LT(testing::max_error(f, te::make_dag({mean})), 1e-5) << lower::print_func(f);
}

}  // namespace
}  // namespace kiln
