// Register-tile seeds: complete, deterministic programs with a CPU register tile, valid for the
// lowering and computing what the DAG computes.
#include "scheduler/sketch/seed_programs.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler/lower/lower_state.h"
#include "scheduler/state/infer_bound.h"
#include "tests/scheduler/lower/lowered_error.h"
#include "scheduler/sketch/sketch_rule.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using namespace state;
using state::testing::conv_dag;
using state::testing::expect_computes_the_dag;
using state::testing::matmul_dag;
using state::testing::row_reduce_dag;

std::vector<State> seeds_of(std::shared_ptr<const te::ComputeDAG> dag) {
  const sketch::SearchParams p;
  return sketch::register_tile_seeds(sketch::generate_sketches(State(dag), p), p);
}

TEST(RegisterTileSeeds, MatmulSeedsAreCompleteDistinctAndDeterministic) {
  auto dag = matmul_dag(256, 128, 64);
  std::vector<State> a = seeds_of(dag), b = seeds_of(dag);
  ASSERT_GE(a.size(), 4u);
  ASSERT_EQ(a.size(), b.size());
  std::set<std::string> printed;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FALSE(a[i].has_undefined_lengths());
    EXPECT_EQ(print_state(a[i]), print_state(b[i]));
    EXPECT_TRUE(printed.insert(print_state(a[i])).second) << "seed " << i << " repeats an earlier one";
    EXPECT_LT(kiln::testing::max_error(a[i]), 1e-3) << print_steps(a[i]) << print_state(a[i]);
  }
}

TEST(RegisterTileSeeds, TheFirstMatmulSeedIsTheDefaultRegisterTile) {
  // Four rows unrolled beside two vector widths of columns, the whole reduction inside: the tile of
  // kiln's default schedule (lower_dag), here reached through Ansor's steps.
  std::vector<State> seeds = seeds_of(matmul_dag(256, 128, 64));
  ASSERT_FALSE(seeds.empty());
  const std::string nest = print_state(seeds[0]);
  EXPECT_NE(nest.find("for r0.1 (0,128)"), std::string::npos) << nest;
  EXPECT_NE(nest.find("for i0.3 (0,4)"), std::string::npos) << nest;
  EXPECT_NE(nest.find("vectorize i1.3 (0,32)"), std::string::npos) << nest;
  EXPECT_NE(nest.find("auto_unroll_max_step=512"), std::string::npos) << nest;
}

TEST(RegisterTileSeeds, APrimeExtentGetsAGuardedTileNotALengthOfOne) {
  // 109 columns and 53 rows: no divisor near the register tile, so the last tile is guarded.
  std::vector<State> seeds = seeds_of(matmul_dag(53, 16, 109));
  ASSERT_FALSE(seeds.empty());
  const std::string nest = print_state(seeds[0]);
  EXPECT_NE(nest.find("for i0.3 (0,4)"), std::string::npos) << nest;
  EXPECT_NE(nest.find("vectorize i1.3 (0,32)"), std::string::npos) << nest;
  EXPECT_LT(kiln::testing::max_error(seeds[0]), 1e-3) << nest;
}

TEST(RegisterTileSeeds, PackedSeedsCopyBlocksOfTheRightHandOperand) {
  // B[k, j] follows the vector loop (j) and not the rows (i): its blocks are copied into a contiguous
  // buffer at the outer reduction loop, 128 reduction steps by 32 columns.
  int packed = 0;
  for (const State& s : seeds_of(matmul_dag(256, 512, 64))) {
    const std::string nest = print_state(s);
    if (nest.find("B.pack") == std::string::npos) continue;
    ++packed;
    EXPECT_EQ(nest.find("A.pack"), std::string::npos) << nest;
    EXPECT_LT(kiln::testing::max_error(s), 1e-3) << print_steps(s) << nest;
  }
  EXPECT_GE(packed, 2);
}

TEST(RegisterTileSeeds, ConvolutionSeedsComputeTheConvolution) {
  std::vector<State> seeds = seeds_of(conv_dag());
  ASSERT_FALSE(seeds.empty());
  for (size_t i = 0; i < seeds.size(); i += 3) {  // a third of them: each JIT compile takes a while
    const State& s = seeds[i];
    EXPECT_LT(kiln::testing::max_error(s), 1e-3) << print_steps(s) << print_state(s);
    expect_computes_the_dag(s);
  }
}

// A convolution in the blocked layout (NCHW16c, weights OIHW16i16o) whose weight is a constant.
std::shared_ptr<const te::ComputeDAG> blocked_conv_dag() {
  auto x = te::placeholder("X", DType::Float32, {1, 2, 8, 16, 16});
  auto w = te::placeholder("W", DType::Float32, {4, 2, 3, 3, 16, 16},
                           std::make_shared<const Tensor>(DType::Float32, Shape{4, 2, 3, 3, 16, 16}));
  auto o = te::reduce("O", "conv", DType::Float32, {1, 4, 6, 14, 16}, te::Reducer::Sum, {2, 3, 3, 16},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(x, {i[0], r[0], i[2] + r[1], i[3] + r[2], r[3]}) *
                               te::at(w, {i[1], r[0], r[1], r[2], r[3], i[4]});
                      });
  return std::make_shared<const te::ComputeDAG>(te::make_dag({o}));
}

TEST(RegisterTileSeeds, BlockedConvolutionsGetTwoDimensionalTilesAndRewrittenWeights) {
  // The default schedule's conv tile: 4 channel blocks by 7 columns by one vector of channels, so each
  // input value is loaded once for 4 blocks and each weight vector once for 7 columns.
  bool two_dimensional = false;
  for (const State& s : seeds_of(blocked_conv_dag())) {
    const std::string nest = print_state(s);
    EXPECT_NE(nest.find("W (layout rewritten)"), std::string::npos) << nest;
    if (nest.find("i1.3 (0,4)") == std::string::npos || nest.find("i3.3 (0,7)") == std::string::npos) continue;
    two_dimensional = true;
    EXPECT_NE(nest.find("vectorize i4.3 (0,16)"), std::string::npos) << nest;
    EXPECT_LT(kiln::testing::max_error(s), 1e-3) << print_steps(s) << nest;
  }
  EXPECT_TRUE(two_dimensional);
}

TEST(RegisterTileSeeds, APackedSeedOfAWeightRewritesItsLayoutInsteadOfCopying) {
  auto a = te::placeholder("A", DType::Float32, {256, 64});
  auto b = te::placeholder("B", DType::Float32, {64, 512}, std::make_shared<const Tensor>(DType::Float32, Shape{64, 512}));
  auto c = te::reduce("C", "matmul", DType::Float32, {256, 512}, te::Reducer::Sum, {64},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(a, {i[0], r[0]}) * te::at(b, {r[0], i[1]});
                      });
  const std::vector<State> seeds = seeds_of(std::make_shared<const te::ComputeDAG>(te::make_dag({c})));
  ASSERT_GE(seeds.size(), 4u);
  for (const State& s : seeds) {
    const std::string nest = print_state(s);
    EXPECT_EQ(nest.find("B.pack"), std::string::npos) << nest;
    EXPECT_NE(nest.find("B (layout rewritten)"), std::string::npos) << nest;
  }
}

TEST(RegisterTileSeeds, ADepthwiseConvPadsPerChannelFirstAndADenseOneAtRoot) {
  // A depthwise conv reads channel c's padded plane only for channel c: the first seed pads it per
  // channel. A dense conv reads every channel at every output channel: its pad stays at root.
  auto x = te::placeholder("X", DType::Float32, {1, 4, 8, 8});
  auto pad = te::compute("P", "pad", DType::Float32, {1, 4, 10, 10}, [&](const std::vector<te::Expr>& i) {
    te::Expr inside = i[2] >= te::int_imm(1) && i[2] < te::int_imm(9) && i[3] >= te::int_imm(1) && i[3] < te::int_imm(9);
    return te::select(inside, te::at(x, {i[0], i[1], i[2] - 1, i[3] - 1}), te::float_imm(0.0));
  });
  auto w = te::placeholder("W", DType::Float32, {4, 3, 3});
  auto o = te::reduce("O", "depthwise", DType::Float32, {1, 4, 8, 8}, te::Reducer::Sum, {3, 3},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(pad, {i[0], i[1], i[2] + r[0], i[3] + r[1]}) * te::at(w, {i[1], r[0], r[1]});
                      });
  std::vector<State> depthwise = seeds_of(state::testing::dag_of({o}));
  ASSERT_FALSE(depthwise.empty());
  const Stage& p = depthwise[0].stage(depthwise[0].stage_id("P"));
  EXPECT_EQ(p.compute_at, ComputeAtKind::Iter) << print_state(depthwise[0]);
  EXPECT_EQ(infer_bound(depthwise[0])[static_cast<size_t>(depthwise[0].stage_id("P"))].nodes[1].extent, 1) << print_state(depthwise[0]);
  EXPECT_LT(kiln::testing::max_error(depthwise[0]), 1e-4) << print_state(depthwise[0]);
  for (const State& s : seeds_of(conv_dag())) EXPECT_EQ(s.stage(s.stage_id("P")).compute_at, ComputeAtKind::Root) << print_state(s);
}

TEST(RegisterTileSeeds, ATaskWithoutTiledStagesHasNone) {
  EXPECT_TRUE(seeds_of(row_reduce_dag()).empty());
}

}  // namespace
}  // namespace kiln
