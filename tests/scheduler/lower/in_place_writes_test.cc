// In-place writes (scheduler/lower/in_place_writes.h): an output may take a dying input's bytes only
// where every read of the input is the read of the element the same store writes, no element of the
// output is written twice and the output is not read. One hand-written statement per case, between
// an input A that dies at it and an output B born there.
#include "scheduler/lower/in_place_writes.h"

#include <gtest/gtest.h>

#include "scheduler/te/expr.h"

namespace kiln::lower {
namespace {

using te::Expr;

Expr imm(int64_t v) { return te::int_imm(v); }
Expr at(const BufferRef& b, const Expr& i) { return load(b, i); }
Stmt loop(const Expr& v, int64_t n, Stmt body, ForKind k = ForKind::Serial) { return for_loop(v, n, k, std::move(body)); }

constexpr int64_t kN = 14;

// A program of one statement, `body`, over A (read, dies there), B (written, born there) and any
// `others` (workspace live through the statement and after it).
ModelProgram program(const BufferRef& A, const BufferRef& B, Stmt body, std::vector<BufferRef> others = {}) {
  ModelProgram p;
  p.func.name = "k";
  p.func.params = {A, B};
  for (BufferRef& o : others) p.func.params.push_back(std::move(o));
  for (size_t i = 0; i < p.func.params.size(); ++i) {
    ModelParam m;
    m.bytes = p.func.params[i]->size * 4;
    m.first_step = i == 0 ? 0 : 1;
    m.last_step = i == 0 ? 1 : 2;
    p.params.push_back(m);
  }
  p.func.body = block({store(A, imm(0), te::float_imm(0)), std::move(body), store(B, imm(0), at(B, imm(0)))});
  p.statement_step = {0, 1, 2};
  p.statement_subgraph = {0, 1, 2};
  return p;
}

struct InPlaceWrites : ::testing::Test {
  BufferRef A = make_buffer("A", DType::Float32, kN), B = make_buffer("B", DType::Float32, kN);
  Expr i = te::var("i"), j = te::var("j"), r = te::var("r");
  std::vector<InPlaceWrite> writes(const Stmt& body, std::vector<BufferRef> others = {}) {
    return find_in_place_writes(program(A, B, body, std::move(others)));
  }
};

TEST_F(InPlaceWrites, AnElementwiseStatementWritesOverItsInput) {
  const auto w = writes(loop(i, kN, store(B, i, at(A, i) * at(A, i) + te::float_imm(1))));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].read, 0u);
  EXPECT_EQ(w[0].written, 1u);
  EXPECT_EQ(w[0].statement, 1u);
}

// A tiled main loop (3 tiles of 4, vectorized) and its tail of 2 write disjoint elements: Z3 proves it.
TEST_F(InPlaceWrites, AMainLoopAndItsTailTogetherWriteEachElementOnce) {
  const Expr main_index = i * imm(4) + j, tail_index = imm(12) + j;
  const Stmt body = block({loop(i, 3, loop(j, 4, store(B, main_index, at(A, i * imm(4) + j) + te::float_imm(1)), ForKind::Vectorized),
                                ForKind::Parallel),
                           loop(j, 2, store(B, tail_index, at(A, tail_index) + te::float_imm(1)))});
  EXPECT_EQ(writes(body).size(), 1u);
}

// 4 x 4 iterations cover 16 indices, the guard keeps the first 12, the tail writes 12 and 13: each
// element once, by the guard. A guard on a loaded value is no fact, and then the two overlap.
TEST_F(InPlaceWrites, AGuardSeparatesAMainLoopFromItsTail) {
  const Expr index = i * imm(4) + j;
  auto body = [&](const Expr& guard) {
    return block({loop(i, 4, loop(j, 4, if_then_else(guard, store(B, index, at(A, index))), ForKind::Vectorized)),
                  loop(j, 2, store(B, imm(12) + j, at(A, imm(12) + j)))});
  };
  EXPECT_EQ(writes(body(index < imm(12))).size(), 1u);
  BufferRef n = make_buffer("n", DType::Int64, 1);
  EXPECT_TRUE(writes(body(index < at(n, imm(0))), {n}).empty());
}

TEST_F(InPlaceWrites, AReadOfANeighbourKeepsThemApart) {
  EXPECT_TRUE(writes(loop(i, kN - 1, store(B, i, at(A, i + imm(1))))).empty());
}

// The loop over r does not move the store: B[i] is written kN times, and from the second on A[i] would
// be the first write's value.
TEST_F(InPlaceWrites, AStoreRepeatedAtOneElementKeepsThemApart) {
  EXPECT_TRUE(writes(loop(i, kN, loop(r, 3, store(B, i, at(A, i) + te::float_imm(1))))).empty());
}

TEST_F(InPlaceWrites, TwoStoresOfOneElementKeepThemApart) {
  const Stmt body = block({loop(i, kN, store(B, i, at(A, i))), store(B, imm(5), at(A, imm(5)) * te::float_imm(2))});
  EXPECT_TRUE(writes(body).empty());
}

TEST_F(InPlaceWrites, AnOutputThatIsReadKeepsThemApart) {
  const Stmt body = block({loop(i, kN, store(B, i, te::float_imm(0))), loop(i, kN, store(B, i, at(B, i) + at(A, i)))});
  EXPECT_TRUE(writes(body).empty());
}

// A is copied into a local tile first: its reads are not the stores to B.
TEST_F(InPlaceWrites, AReadOutsideTheOutputsStoreKeepsThemApart) {
  BufferRef T = make_buffer("T", DType::Float32, kN, /*local=*/true);
  const Stmt body = allocate(T, block({loop(i, kN, store(T, i, at(A, i))), loop(i, kN, store(B, i, at(T, i)))}));
  EXPECT_TRUE(writes(body).empty());
}

TEST_F(InPlaceWrites, AnOutputStoredAtALoadedIndexKeepsThemApart) {
  BufferRef idx = make_buffer("idx", DType::Int64, kN);
  EXPECT_TRUE(writes(loop(i, kN, store(B, at(idx, i), at(A, at(idx, i)))), {idx}).empty());
}

TEST_F(InPlaceWrites, ARuntimeKernelsArgumentKeepsThemApart) {
  const Stmt body = block({loop(i, kN, store(B, i, at(A, i))), extern_call("kiln_rt_topk", {A, B}, {})});
  EXPECT_TRUE(writes(body).empty());
}

TEST_F(InPlaceWrites, BuffersOfAnotherTypeOrSizeStayApart) {
  BufferRef C = make_buffer("C", DType::Int32, kN);
  EXPECT_TRUE(find_in_place_writes(program(A, C, loop(i, kN, store(C, i, te::cast(DType::Int32, at(A, i)))))).empty());
  BufferRef D = make_buffer("D", DType::Float32, kN - 1);
  EXPECT_TRUE(find_in_place_writes(program(A, D, loop(i, kN - 1, store(D, i, at(A, i))))).empty());
}

TEST_F(InPlaceWrites, AnInputThatLivesOnStaysApart) {
  ModelProgram p = program(A, B, loop(i, kN, store(B, i, at(A, i))));
  p.params[0].last_step = 2;
  EXPECT_TRUE(find_in_place_writes(p).empty());
}

// A statement of a loop (kiln.StepLoop: several steps) is not examined.
TEST_F(InPlaceWrites, ALoopsStatementIsNotExamined) {
  ModelProgram p = program(A, B, loop(i, kN, store(B, i, at(A, i))));
  p.statement_step[1] = -1;
  EXPECT_TRUE(find_in_place_writes(p).empty());
}

TEST_F(InPlaceWrites, PrintsOnePairALine) {
  const ModelProgram p = program(A, B, loop(i, kN, store(B, i, at(A, i))));
  EXPECT_EQ(print_in_place_writes(p, find_in_place_writes(p)), "B over A (statement 1)\n");
}

}  // namespace
}  // namespace kiln::lower
