// Loop partition at bound tests: the parts a loop splits into, the tests folded in each, what is left
// alone, and that a padded input lowered from a state still computes what the DAG computes.
#include "scheduler/lower/partition_loops.h"

#include <gtest/gtest.h>

#include "scheduler/lower/lower_state.h"
#include "tests/scheduler/lower/lowered_error.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using lower::make_buffer;
using te::int_imm;

struct Loop {
  lower::BufferRef x = make_buffer("x", DType::Float32, 16), y = make_buffer("y", DType::Float32, 16);
  te::Expr i = te::var("i"), j = te::var("j");
};

TEST(PartitionLoops, APaddedCopySplitsIntoZerosCopiesAndZeros) {
  Loop l;
  // y[i] = select(i - 2 >= 0 && i < 7, x[i - 2], 0) over 0..10: zeros on 0..2, copies on 2..7, zeros on 7..10.
  te::Expr inside = (l.i - int_imm(2) >= int_imm(0)) && (l.i < int_imm(7));
  lower::Stmt s = lower::for_loop(l.i, 10, lower::ForKind::Vectorized,
                                  lower::store(l.y, l.i, te::select(inside, lower::load(l.x, l.i - int_imm(2)), te::float_imm(0))));
  const std::string got = lower::print_stmt(lower::partition_guarded_loops(s));
  EXPECT_EQ(got,
            "vectorized for i in 0..2:\n  y[i] = float32(0)\n"
            "vectorized for i in 0..5:\n  y[(i + 2)] = x[((i + 2) - 2)]\n"
            "vectorized for i in 0..3:\n  y[(i + 7)] = float32(0)\n")
      << got;
}

TEST(PartitionLoops, ADecreasingTestAndAnIfSplitToo) {
  Loop l;
  // if 5 - i >= 0 (i <= 5) over 0..8: the then-branch on 0..6, and no loop on 6..8.
  lower::Stmt s = lower::for_loop(l.i, 8, lower::ForKind::Serial,
                                  lower::if_then_else(int_imm(5) - l.i >= int_imm(0), lower::store(l.y, l.i, te::float_imm(1))));
  const std::string got = lower::print_stmt(lower::partition_guarded_loops(s));
  EXPECT_EQ(got, "for i in 0..6:\n  y[i] = float32(1)\n") << got;
}

TEST(PartitionLoops, TestsOnSeveralVariablesOrWithManyCutsStay) {
  Loop l;
  // i + j >= 3 moves with j too: no constant split point along i.
  te::Expr two_vars = l.i + l.j >= int_imm(3);
  lower::Stmt s = lower::for_loop(
      l.j, 4, lower::ForKind::Serial,
      lower::for_loop(l.i, 4, lower::ForKind::Serial, lower::store(l.y, l.i, te::select(two_vars, lower::load(l.x, l.i), te::float_imm(0)))));
  EXPECT_EQ(lower::print_stmt(lower::partition_guarded_loops(s)), lower::print_stmt(s));
  // Three cut points inside the loop would make four parts.
  te::Expr many = (l.i >= int_imm(1)) && (l.i < int_imm(3)) && (l.i >= int_imm(2));
  lower::Stmt t = lower::for_loop(l.i, 8, lower::ForKind::Serial, lower::store(l.y, l.i, te::select(many, lower::load(l.x, l.i), te::float_imm(0))));
  EXPECT_EQ(lower::print_stmt(lower::partition_guarded_loops(t)), lower::print_stmt(t));
}

TEST(PartitionLoops, APaddedStageLowersWithoutSelectsAndComputesTheDag) {
  // conv_dag's P pads X by one on each side of a 10 x 10 plane; every stage at root.
  state::State s(state::testing::conv_dag());
  lower::LoweredFunc f = lower::lower_state_func(s, "prog");
  const std::string printed = lower::print_func(f);
  EXPECT_EQ(printed.find("select"), std::string::npos) << printed;
  EXPECT_LT(kiln::testing::max_error(f, s.dag()), 1e-5) << printed;  // the conv sums in another order
}

}  // namespace
}  // namespace kiln
