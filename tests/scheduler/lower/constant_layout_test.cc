// Layout rewrite of constants (scheduler/lower/constant_layout.h): a weight read by a tiled nest is
// stored in the order of the loops that read it, filled from the original on the function's first call,
// and the program computes what the DAG computes (the JIT against the tensor-expression evaluator),
// also when tiles overshoot the weight; a weight read in its own order or in two ways keeps its layout.
#include <gtest/gtest.h>

#include "scheduler/lower/constant_layout.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/lower_state.h"
#include "scheduler/state/steps/layout_rewrite_step.h"
#include "scheduler/state/steps/reorder_step.h"
#include "scheduler/state/steps/split_step.h"
#include "tests/scheduler/lower/lowered_error.h"

namespace kiln {
namespace {

using namespace state;

// C[i, j] = sum_k A[i, k] * B[k, j] with B a constant (a weight).
std::shared_ptr<const te::ComputeDAG> matmul_with_weight(int64_t m, int64_t n, int64_t k, bool read_twice = false) {
  auto a = te::placeholder("A", DType::Float32, {m, k});
  auto weight = std::make_shared<Tensor>(DType::Float32, Shape{k, n});
  for (int64_t e = 0; e < k * n; ++e) weight->set_double(e, static_cast<double>((e * 7919) % 97) / 97.0 - 0.5);
  auto b = te::placeholder("B", DType::Float32, {k, n}, weight);
  auto c = te::reduce("C", "matmul", DType::Float32, {m, n}, te::Reducer::Sum, {k},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        te::Expr v = te::at(a, {i[0], r[0]}) * te::at(b, {r[0], i[1]});
                        return read_twice ? v + te::at(b, {i[1], r[0]}) : v;
                      });
  return std::make_shared<te::ComputeDAG>(te::make_dag({c}));
}

// C tiled as a register tile would be: i.0 j.0 k.0 i.1 k.1 j.1, the weight rewritten.
State tiled(int64_t m, int64_t n, int64_t k, int64_t cols, bool read_twice = false) {
  State s(matmul_with_weight(m, n, k, read_twice));
  s.apply(std::make_shared<SplitStep>(2, 0, m, std::vector<std::optional<int64_t>>{4}));
  s.apply(std::make_shared<SplitStep>(2, 2, n, std::vector<std::optional<int64_t>>{cols}));
  s.apply(std::make_shared<SplitStep>(2, 4, k, std::vector<std::optional<int64_t>>{8}));
  s.apply(std::make_shared<ReorderStep>(2, std::vector<int>{0, 2, 4, 1, 5, 3}));
  s.apply(std::make_shared<LayoutRewriteStep>(1));
  return s;
}

const lower::Buffer* param_named(const lower::LoweredFunc& f, const std::string& name) {
  for (const lower::BufferRef& b : f.params)
    if (b->name == name) return b.get();
  return nullptr;
}

TEST(ConstantLayout, ATiledMatmulReadsItsWeightPanelByPanel) {
  const State s = tiled(16, 64, 32, 16);
  const lower::LoweredFunc f = lower::lower_state_func(s, "k");
  const std::string ir = lower::print_func(f);
  const lower::Buffer* b = param_named(f, "B.tiled");
  ASSERT_NE(b, nullptr) << ir;
  ASSERT_TRUE(b->relayout) << ir;
  // One dimension per loop that moves the index (j.0, k.0, k.1, j.1), in nesting order, so the vector
  // loop j.1 walks it with stride 1 and each k.1 step reads the next 16 floats.
  EXPECT_EQ(b->relayout->extents, (std::vector<int64_t>{4, 4, 8, 16}));
  EXPECT_EQ(b->relayout->source_strides, (std::vector<int64_t>{16, 8 * 64, 64, 1}));
  EXPECT_EQ(b->size, 16 * 4 * 8 * 4);
  const std::string nest = lower::print_func(lower::lower_state_func(s, "k", false));
  EXPECT_EQ(nest.find(" B["), std::string::npos) << "the nest still reads B itself:\n" << nest;
  EXPECT_LT(testing::max_error(s), 1e-4) << ir;
  // Without the fill on the first call the program would read zeros.
  const lower::LoweredFunc unfilled = lower::lower_state_func(s, "k", false);
  EXPECT_EQ(param_named(unfilled, "k.constants_filled"), nullptr);
  EXPECT_NE(param_named(f, "k.constants_filled"), nullptr);
}

TEST(ConstantLayout, TilesThatOvershootTheWeightPadItWithZeros) {
  const State s = tiled(13, 37, 11, 16);  // 37 columns in tiles of 16, 11 reduction steps in tiles of 8
  const lower::LoweredFunc f = lower::lower_state_func(s, "k");
  const lower::Buffer* b = param_named(f, "B.tiled");
  ASSERT_NE(b, nullptr) << lower::print_func(f);
  EXPECT_EQ(b->size, 3 * 2 * 8 * 16);
  EXPECT_LT(testing::max_error(s), 1e-4) << lower::print_func(f);
}

TEST(ConstantLayout, AWeightReadInItsOwnOrderOrInTwoWaysKeepsItsLayout) {
  // Loops i, k, j read B[k, j] row by row: already the order of the loops.
  State own(matmul_with_weight(8, 16, 4));
  own.apply(std::make_shared<ReorderStep>(2, std::vector<int>{0, 2, 1}));
  own.apply(std::make_shared<LayoutRewriteStep>(1));
  EXPECT_EQ(param_named(lower::lower_state_func(own, "k"), "B.tiled"), nullptr);
  // B[k, j] and B[j, k] in one body: no one order serves both loads.
  const State twice = tiled(16, 16, 16, 16, true);
  const lower::LoweredFunc f = lower::lower_state_func(twice, "k");
  EXPECT_EQ(param_named(f, "B.tiled"), nullptr) << lower::print_func(f);
  EXPECT_LT(testing::max_error(twice), 1e-4);
}

TEST(ConstantLayout, OnlyAConstantInputCanBeRewritten) {
  State s(matmul_with_weight(8, 16, 4));
  EXPECT_THROW(s.apply(std::make_shared<LayoutRewriteStep>(0)), ScheduleError);  // A is a graph input
  EXPECT_THROW(s.apply(std::make_shared<LayoutRewriteStep>(2)), ScheduleError);  // C is computed
  EXPECT_THROW(s.apply(std::make_shared<LayoutRewriteStep>(7)), ScheduleError);
  s.apply(std::make_shared<LayoutRewriteStep>(1));
  EXPECT_THROW(s.apply(std::make_shared<LayoutRewriteStep>(1)), ScheduleError);  // twice
  EXPECT_NE(print_state(s).find("B (layout rewritten)"), std::string::npos) << print_state(s);
}

TEST(ConstantLayout, TheDefaultScheduleRewritesAMatmulsWeightButNotAConvolutions) {
  // A matmul's default tile reads its weight a row apart per reduction step: rewritten. A
  // convolution's weight is packed for the default tile by the layout stage: kept.
  const lower::LoweredFunc matmul = lower::lower_dag(*matmul_with_weight(64, 64, 64), "k", {});
  const lower::Buffer* b = param_named(matmul, "B.tiled");
  ASSERT_NE(b, nullptr) << lower::print_func(matmul);
  const std::string ir = lower::print_func(matmul);
  size_t reads = 0;  // of B itself: the fill's alone
  for (size_t at = ir.find(" B["); at != std::string::npos; at = ir.find(" B[", at + 1)) ++reads;
  EXPECT_EQ(reads, 1u) << ir;
  EXPECT_NE(param_named(matmul, "k.constants_filled"), nullptr);

  auto x = te::placeholder("X", DType::Float32, {1, 4, 10});
  auto w = te::placeholder("W", DType::Float32, {8, 4, 3}, std::make_shared<const Tensor>(DType::Float32, Shape{8, 4, 3}));
  auto y = te::reduce("Y", "conv", DType::Float32, {1, 8, 8}, te::Reducer::Sum, {4, 3},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(x, {i[0], r[0], i[2] + r[1]}) * te::at(w, {i[1], r[0], r[1]});
                      });
  const lower::LoweredFunc conv = lower::lower_dag(te::make_dag({y}), "k", {});
  EXPECT_EQ(param_named(conv, "W.tiled"), nullptr) << lower::print_func(conv);
}

TEST(ConstantLayout, RelayoutConstantGathersAndPads) {
  // A 2x3 source [[0 1 2] [3 4 5]] read as out[c][r] = source[r * 3 + c] with c < 4 (one column past).
  Tensor source(DType::Float32, Shape{2, 3});
  for (int64_t i = 0; i < 6; ++i) source.set_double(i, static_cast<double>(i));
  lower::ConstantLayout layout;
  layout.source = lower::make_buffer("s", DType::Float32, 6);
  layout.extents = {4, 2};
  layout.source_strides = {1, 3};
  const Tensor out = lower::relayout_constant(source, layout);
  ASSERT_EQ(num_elements(out.shape()), 8);
  const std::vector<double> want = {0, 3, 1, 4, 2, 5, 3, 0};  // column 3 of row 0 is source[3]; of row 1, past the end
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(out.get_double(i), want[static_cast<size_t>(i)]) << i;
}

}  // namespace
}  // namespace kiln
