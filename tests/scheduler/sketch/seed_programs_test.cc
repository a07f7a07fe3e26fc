// Register-tile seeds: complete, deterministic programs with a CPU register tile, valid for the
// lowering and computing what the DAG computes.
#include "scheduler/sketch/seed_programs.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler/lower/lower_state.h"
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
    if (nest.find("B.global") == std::string::npos) continue;
    ++packed;
    EXPECT_EQ(nest.find("A.global"), std::string::npos) << nest;
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

TEST(RegisterTileSeeds, ATaskWithoutTiledStagesHasNone) {
  EXPECT_TRUE(seeds_of(row_reduce_dag()).empty());
}

}  // namespace
}  // namespace kiln
