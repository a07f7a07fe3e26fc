// The bounds check of lowered programs (scheduler/lower/bounds_check.h): what it proves, what it
// refuses with a counterexample, what it leaves to codegen's clamps, and the stack its locals need.
#include "scheduler/lower/bounds_check.h"

#include <gtest/gtest.h>

#include "scheduler/lower/lower_dag.h"

namespace kiln {
namespace {

using lower::BufferRef;
using lower::ForKind;
using lower::make_buffer;
using te::Expr;
using te::int_imm;

Expr f32(double v) { return te::const_of(DType::Float32, v); }

lower::Stmt loop(const Expr& v, int64_t extent, lower::Stmt body, ForKind kind = ForKind::Serial) {
  return lower::for_loop(v, extent, kind, std::move(body));
}

TEST(BoundsCheck, AffineAndSplitIndicesAreProvenByIntervals) {
  BufferRef out = make_buffer("out", DType::Float32, 16 * 58), in = make_buffer("in", DType::Float32, 18 * 58);
  Expr o = te::var("o"), i = te::var("i"), j = te::var("j");
  // Rows o * 4 + i of a 16 x 58 output, read from rows + 2 of the input less the base they share.
  Expr row = o * int_imm(4) + i;
  Expr in_index = ((row + int_imm(2)) * int_imm(58) + j) - o * int_imm(4 * 58);
  lower::Stmt s = loop(o, 4, loop(i, 4, loop(j, 58, lower::store(out, row * int_imm(58) + j,
                                                                     lower::load(in, in_index + o * int_imm(4 * 58))))));
  EXPECT_FALSE(lower::first_out_of_bounds(s).has_value());
  lower::Stmt wrapped = loop(j, 100, lower::store(out, te::floormod(j, int_imm(16 * 58)), f32(0)));
  EXPECT_FALSE(lower::first_out_of_bounds(wrapped).has_value());
}

// A split that does not divide its extent leaves the last tile's tail past the buffer: refused, with
// the loop values that get there; the same store under the guard that such tails get is proven (Z3).
TEST(BoundsCheck, AnUnguardedTailIsRefusedAndAGuardedOneProven) {
  BufferRef out = make_buffer("out", DType::Float32, 50);
  Expr o = te::var("o"), i = te::var("i");
  Expr index = o * int_imm(8) + i;
  const auto v = lower::first_out_of_bounds(loop(o, 7, loop(i, 8, lower::store(out, index, f32(1)))));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->buffer, "out");
  EXPECT_EQ(v->access, "store");
  EXPECT_NE(v->why.find("make it"), std::string::npos) << v->why;
  const std::string line = lower::describe(*v);
  EXPECT_NE(line.find("a store of out (size 50)"), std::string::npos) << line;

  lower::Stmt guarded = loop(o, 7, loop(i, 8, lower::if_then_else(index < int_imm(50), lower::store(out, index, f32(1)))));
  EXPECT_FALSE(lower::first_out_of_bounds(guarded).has_value());
  // The else branch knows the opposite: storing there at index - 50 is in bounds too.
  lower::Stmt both = loop(o, 7, loop(i, 8, lower::if_then_else(index < int_imm(50), lower::store(out, index, f32(1)),
                                                               lower::store(out, index - int_imm(50), f32(2)))));
  EXPECT_FALSE(lower::first_out_of_bounds(both).has_value());
}

// Loads under a select's branches are clamped into their buffer by codegen (a padded copy's taps):
// not checked. A load outside a select, or an index read from memory, must be proven.
TEST(BoundsCheck, LoadsUnderASelectAreLeftToCodegensClampOthersAreProven) {
  BufferRef out = make_buffer("out", DType::Float32, 12), in = make_buffer("in", DType::Float32, 10);
  BufferRef idx = make_buffer("idx", DType::Int64, 12);
  Expr i = te::var("i");
  Expr shifted = i - int_imm(1);
  lower::Stmt padded = loop(i, 12, lower::store(out, i, te::select(shifted >= int_imm(0) && shifted < int_imm(10),
                                                                    lower::load(in, shifted), f32(0))));
  EXPECT_FALSE(lower::first_out_of_bounds(padded).has_value());
  const auto raw = lower::first_out_of_bounds(loop(i, 12, lower::store(out, i, lower::load(in, shifted))));
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->access, "load");
  EXPECT_EQ(raw->buffer, "in");
  const auto gathered = lower::first_out_of_bounds(loop(i, 12, lower::store(out, i, lower::load(in, lower::load(idx, i)))));
  ASSERT_TRUE(gathered.has_value()) << "an index read from memory can be anything";
  EXPECT_EQ(gathered->buffer, "in");
  lower::Stmt clamped = loop(i, 12, lower::store(out, i, lower::load(in, te::min(te::max(lower::load(idx, i), int_imm(0)), int_imm(9)))));
  EXPECT_FALSE(lower::first_out_of_bounds(clamped).has_value());
}

// Locals live in their function's frame for the whole call: the function's own plus the largest
// parallel task's, one copy per lane inside a vectorized loop, must fit the limit.
TEST(BoundsCheck, LocalBuffersMustFitTheStack) {
  BufferRef out = make_buffer("out", DType::Float32, 4);
  Expr i = te::var("i"), k = te::var("k");
  auto with_local = [&](int64_t floats, lower::Stmt body) {
    BufferRef local = make_buffer("local", DType::Float32, floats, true);
    return lower::allocate(local, lower::block({lower::store(local, int_imm(0), f32(1)), std::move(body)}));
  };
  const int64_t quarter = lower::kMaxStackBytes / 4 / 4;  // floats in a quarter of the limit
  lower::Stmt small = with_local(quarter, loop(i, 4, with_local(quarter, lower::store(out, i, f32(0))), ForKind::Parallel));
  EXPECT_FALSE(lower::first_out_of_bounds(small).has_value());
  lower::Stmt big = with_local(3 * quarter, loop(i, 4, with_local(2 * quarter, lower::store(out, i, f32(0))), ForKind::Parallel));
  const auto v = lower::first_out_of_bounds(big);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->buffer, "stack");
  EXPECT_NE(lower::describe(*v).find(std::to_string(5 * quarter * 4) + " bytes of stack"), std::string::npos)
      << lower::describe(*v);
  lower::Stmt per_lane = loop(k, 16, with_local(quarter / 8, lower::store(out, int_imm(0), f32(0))), ForKind::Vectorized);
  EXPECT_TRUE(lower::first_out_of_bounds(per_lane, lower::kMaxStackBytes, 64).has_value()) << "64 copies of a 32nd";
  EXPECT_FALSE(lower::first_out_of_bounds(per_lane, lower::kMaxStackBytes, 16).has_value());
}

// Every default schedule is proven: a depthwise conv with its padded planes, a dense conv, a transpose.
TEST(BoundsCheck, DefaultSchedulesAreProven) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 8, 20, 20});
  te::TensorRef w = te::placeholder("w", DType::Float32, {8, 1, 3, 3});
  te::TensorRef pad = te::compute("x.pad", "pad", DType::Float32, {1, 8, 22, 22}, [&](const std::vector<Expr>& i) {
    Expr h = i[2] - int_imm(1), c = i[3] - int_imm(1);
    return te::select(h >= int_imm(0) && h < int_imm(20) && c >= int_imm(0) && c < int_imm(20), te::at(x, {i[0], i[1], h, c}), f32(0));
  });
  te::TensorRef conv = te::reduce("conv", "conv", DType::Float32, {1, 8, 20, 20}, te::Reducer::Sum, {3, 3},
                                  [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                    return te::at(pad, {o[0], o[1], o[2] + r[0], o[3] + r[1]}) * te::at(w, {o[1], int_imm(0), r[0], r[1]});
                                  });
  te::TensorRef t = te::compute("t", "injective", DType::Float32, {20, 8, 20}, [&](const std::vector<Expr>& i) {
    return te::at(conv, {int_imm(0), i[1], i[0], i[2]});
  });
  lower::ScheduleParams threads;
  threads.min_parallel_work = 1;
  const lower::LoweredFunc f = lower::lower_dag(te::make_dag({t}), "k", threads);
  EXPECT_NO_THROW(lower::check_bounds(f)) << lower::print_func(f);
}

}  // namespace
}  // namespace kiln
