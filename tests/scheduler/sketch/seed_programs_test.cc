// Register-tile seeds: complete, deterministic programs with a CPU register tile, valid for the
// lowering and computing what the DAG computes.
#include "scheduler/sketch/seed_programs.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler/lower/lower_state.h"
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
    EXPECT_NO_THROW(lower::lower_state_func(a[i], "seed"));
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

TEST(RegisterTileSeeds, ConvolutionSeedsComputeTheConvolution) {
  std::vector<State> seeds = seeds_of(conv_dag());
  ASSERT_FALSE(seeds.empty());
  for (const State& s : seeds) {
    EXPECT_NO_THROW(lower::lower_state_func(s, "seed"));
    expect_computes_the_dag(s);
  }
}

TEST(RegisterTileSeeds, ATaskWithoutTiledStagesHasNone) {
  EXPECT_TRUE(seeds_of(row_reduce_dag()).empty());
}

}  // namespace
}  // namespace kiln
