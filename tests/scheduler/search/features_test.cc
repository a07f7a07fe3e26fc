// Per-store features on small loop nests whose values are worked out by hand in the comments, plus
// real scheduled states (a hand-tiled matmul, sampled sketches) for the shape of the output and speed.
// Every expected value is the raw quantity; the row holds log2(1 + x) of it.
#include "scheduler/search/features.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <iostream>
#include <set>
#include <thread>

#include "scheduler/lower/lower_state.h"
#include "scheduler/search/gpu_tile_search.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using lower::ForKind;
using lower::make_buffer;
using search::feature_names;
using search::kFeaturesPerStore;

float feature(const std::vector<float>& row, const std::string& name) {
  const auto& names = feature_names();
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) ADD_FAILURE() << "no feature named " << name;
  return it == names.end() ? -1.0f : row.at(static_cast<size_t>(it - names.begin()));
}

// The row holds log2(1 + x); compare in that space so large counts keep relative precision.
#define EXPECT_FEATURE(row, name, raw) EXPECT_NEAR(feature(row, name), std::log2(1.0 + (raw)), 1e-4) << (name)

// Every name not listed is zero (the one-hots' other slots, the GPU values, absent buffers).
void expect_rest_zero(const std::vector<float>& row, const std::set<std::string>& nonzero) {
  const auto& names = feature_names();
  for (size_t k = 0; k < names.size(); ++k)
    if (!nonzero.count(names[k])) {
      EXPECT_EQ(row[k], 0.0f) << names[k];
    }
}

size_t count_stores(const lower::Stmt& s) {
  if (!s) return 0;
  size_t n = s->kind == lower::StmtKind::Store;
  for (const lower::Stmt& b : s->body) n += count_stores(b);
  return n;
}

lower::LoweredFunc func_of(lower::Stmt body) {
  lower::LoweredFunc f;
  f.name = "nest";
  f.body = std::move(body);
  return f;
}

TEST(Features, NamesAreUniqueAndMatchTheRowLength) {
  const auto& names = feature_names();
  EXPECT_EQ(names.size(), static_cast<size_t>(kFeaturesPerStore));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_EQ(names.front(), "float_mad");
  EXPECT_EQ(names[57], "B0.read") << "57 computation values come first, as in Ansor";
  EXPECT_EQ(names[57 + 5 * 18], "intensity.0");
  EXPECT_EQ(names.back(), "auto_unroll_max_step");
}

// parallel for i in 0..16: vectorized for j in 0..8: C[i*8 + j] = A[i*8 + j] * B[j] + 1
TEST(Features, ElementwiseMultiplyAddVectorizedAndParallel) {
  auto a = make_buffer("A", DType::Float32, 128), b = make_buffer("B", DType::Float32, 8);
  auto c = make_buffer("C", DType::Float32, 128);
  te::Expr i = te::var("i"), j = te::var("j");
  te::Expr value = lower::load(a, i * 8 + j) * lower::load(b, j) + te::float_imm(1.0);
  auto body = lower::for_loop(i, 16, ForKind::Parallel,
                              lower::for_loop(j, 8, ForKind::Vectorized, lower::store(c, i * 8 + j, value)));
  const search::ProgramFeatures rows = search::extract_features(func_of(body));
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<float>& r = rows[0];
  ASSERT_EQ(r.size(), static_cast<size_t>(kFeaturesPerStore));
  // a*b + 1 is one float multiply-add, A's index i*8 + j one int multiply-add; 128 executions.
  EXPECT_FEATURE(r, "float_mad", 128);
  EXPECT_FEATURE(r, "int_mad", 128);
  // j: stride 1 in C, the smallest of the stored index's strides {8 (i), 1 (j)}: inner spatial.
  EXPECT_FEATURE(r, "vec_num", 1);
  EXPECT_FEATURE(r, "vec_prod", 8);
  EXPECT_FEATURE(r, "vec_len", 8);
  EXPECT_FEATURE(r, "vec_pos.inner_spatial", 1);
  // i: the largest stride (8): outer spatial.
  EXPECT_FEATURE(r, "parallel_num", 1);
  EXPECT_FEATURE(r, "parallel_prod", 16);
  EXPECT_FEATURE(r, "parallel_len", 16);
  EXPECT_FEATURE(r, "parallel_pos.outer_spatial", 1);
  EXPECT_FEATURE(r, "unroll_pos.none", 1);
  EXPECT_FEATURE(r, "vec_pos.none", 0);
  // Lines: C, A and B all cross 128 * 4 / 64 = 8 lines (stride 1), 512 bytes each: C (the store),
  // then A, B in order of appearance.
  // C: write; unique 128 elements = 512 B, contiguous, 512/64 = 8 unique lines. Reuse: j and i both
  // move it: none (divisions by the reuse count double instead).
  EXPECT_FEATURE(r, "B0.write", 1);
  EXPECT_FEATURE(r, "B0.bytes", 512);
  EXPECT_FEATURE(r, "B0.unique_bytes", 512);
  EXPECT_FEATURE(r, "B0.lines", 8);
  EXPECT_FEATURE(r, "B0.unique_lines", 8);
  EXPECT_FEATURE(r, "B0.reuse_none", 1);
  EXPECT_FEATURE(r, "B0.bytes_d_reuse_ct", 1024);
  EXPECT_FEATURE(r, "B0.unique_bytes_d_reuse_ct", 1024);
  EXPECT_FEATURE(r, "B0.lines_d_reuse_ct", 16);
  EXPECT_FEATURE(r, "B0.unique_lines_d_reuse_ct", 16);
  EXPECT_FEATURE(r, "B0.stride", 1);
  EXPECT_FEATURE(r, "B1.read", 1);
  EXPECT_FEATURE(r, "B1.unique_bytes", 512);
  // B: 8 elements (32 B, one line) read again on each of i's 16 iterations. Reuse distance: j moves
  // it (8 iterations), after which the j loop has touched C, A, B 8 elements each = 96 bytes.
  EXPECT_FEATURE(r, "B2.read", 1);
  EXPECT_FEATURE(r, "B2.bytes", 512);
  EXPECT_FEATURE(r, "B2.unique_bytes", 32);
  EXPECT_FEATURE(r, "B2.lines", 8);
  EXPECT_FEATURE(r, "B2.unique_lines", 1);
  EXPECT_FEATURE(r, "B2.reuse_loop_read", 1);
  EXPECT_FEATURE(r, "B2.reuse_dis_iter", 8);
  EXPECT_FEATURE(r, "B2.reuse_dis_bytes", 96);
  EXPECT_FEATURE(r, "B2.reuse_ct", 16);
  EXPECT_FEATURE(r, "B2.bytes_d_reuse_ct", 32);
  EXPECT_FEATURE(r, "B2.unique_lines_d_reuse_ct", 1.0 / 16);
  EXPECT_FEATURE(r, "B2.stride", 1);
  EXPECT_FEATURE(r, "B3.bytes", 0);
  // Intensity: 2 FLOPs (the multiply-add) per store. Inside j: 16 FLOPs over 96 bytes; inside i: 256
  // FLOPs over 128*4 (C) + 128*4 (A) + 8*4 (B) = 1056 bytes. The last point is the whole nest.
  EXPECT_FEATURE(r, "intensity.9", 256.0 / 1056);
  const double first = 16.0 / 96 + (256.0 / 1056 - 16.0 / 96) / (256 - 16) * (25.6 - 16);
  EXPECT_FEATURE(r, "intensity.0", first);
  EXPECT_FEATURE(r, "alloc_size", 0);
  EXPECT_FEATURE(r, "outer_prod", 128);
  EXPECT_FEATURE(r, "num_loops", 2);
  EXPECT_FEATURE(r, "auto_unroll_max_step", 0);
}

// A GPU kernel: GpuBlock for b in 0..8: GpuThread for t in 0..128: C[b*128 + t] = A[t*8 + b] * 2.
// With 128-byte lines: C's consecutive threads store consecutive elements (coalesced): 1024 stores x
// 4 B / 128 B = 32 lines; A's threads read 8 elements apart, 32 B: 1024 x 32 / 128 = 256 lines, though
// the loop b outside moves A by 1 (a CPU's innermost-loop view would count 32 lines for both).
TEST(Features, GpuKernelsHaveTheirGridBlockAndCoalescedLines) {
  auto a = make_buffer("A", DType::Float32, 1024), c = make_buffer("C", DType::Float32, 1024);
  te::Expr b = te::var("b"), t = te::var("t");
  auto body = lower::for_loop(
      b, 8, ForKind::GpuBlock,
      lower::for_loop(t, 128, ForKind::GpuThread, lower::store(c, b * 128 + t, lower::load(a, t * 8 + b) * te::float_imm(2.0))));
  const search::ProgramFeatures rows = search::extract_features(func_of(body), 128);
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<float>& r = rows[0];
  EXPECT_FEATURE(r, "is_gpu", 1);
  EXPECT_FEATURE(r, "block_x_len", 8);
  EXPECT_FEATURE(r, "thread_x_len", 128);
  EXPECT_FEATURE(r, "parallel_num", 0);  // blocks and threads are not CPU-parallel loops
  EXPECT_FEATURE(r, "B0.read", 1);       // A crosses the most lines
  EXPECT_FEATURE(r, "B0.lines", 256);
  EXPECT_FEATURE(r, "B0.stride", 8);
  EXPECT_FEATURE(r, "B1.write", 1);
  EXPECT_FEATURE(r, "B1.lines", 32);
  EXPECT_FEATURE(r, "B1.stride", 1);
  for (const char* zero : {"block_y_len", "block_z_len", "thread_y_len", "thread_z_len", "vthread_len"})
    EXPECT_FEATURE(r, zero, 0);
}

// GPU programs of one matmul task with two shared-memory tiles: the tuner's cost model tells them
// apart by their blocks' threads and grids (search/gpu_tile_search.h).
TEST(Features, GpuTileProgramsDifferByTheirThreadsAndGrid) {
  using namespace state::testing;
  const auto dag = matmul_dag(256, 128, 256);  // C: 256 x 256
  const lower::GpuScheduleParams gp = lower::GpuScheduleParams{};
  const std::vector<search::GpuStageSpace> space = search::gpu_task_space(*dag, gp);
  ASSERT_EQ(space.size(), 1u);
  const std::vector<lower::GpuSharedTile>& tiles = space[0].tiles;
  std::set<std::pair<float, float>> seen;  // (threads, grid) of the kernel's compute phase
  for (size_t i = 0; i < tiles.size(); i += std::max<size_t>(1, tiles.size() / 16)) {
    const search::ProgramFeatures rows =
        search::gpu_program_features(search::gpu_program(dag, space, {static_cast<int>(i)}), gp);
    ASSERT_FALSE(rows.empty()) << i;
    float threads = 0, grid = 0;
    for (const std::vector<float>& r : rows) {
      EXPECT_FEATURE(r, "is_gpu", 1);
      if (feature(r, "float_mad") > 0) {  // the update of the accumulators
        threads = feature(r, "thread_x_len");
        grid = feature(r, "block_x_len");
      }
    }
    EXPECT_NEAR(threads, std::log2(1.0 + static_cast<double>(tiles[i].threads())), 1e-4) << i;
    int64_t blocks = 256 * 256;
    for (size_t d = 0; d < 2; ++d) blocks /= tiles[i].block[d];
    EXPECT_NEAR(grid, std::log2(1.0 + static_cast<double>(blocks)), 1e-4) << i;
    seen.insert({threads, grid});
  }
  EXPECT_GT(seen.size(), 3u);
}

// A loop of one iteration is not a loop: the same nest wrapped in `for u in 0..1` (with u in the
// indices) gives the same row, two loops, not three.
TEST(Features, LoopsOfOneIterationAreIgnored) {
  auto a = make_buffer("A", DType::Float32, 64), c = make_buffer("C", DType::Float32, 64);
  te::Expr u = te::var("u"), i = te::var("i"), j = te::var("j");
  auto nest = [&](te::Expr offset) {
    te::Expr idx = offset ? offset * 64 + (i * 8 + j) : i * 8 + j;
    return lower::for_loop(i, 8, ForKind::Serial, lower::for_loop(j, 8, ForKind::Vectorized,
                                                                  lower::store(c, idx, lower::load(a, idx))));
  };
  const search::ProgramFeatures plain = search::extract_features(func_of(nest(nullptr)));
  const search::ProgramFeatures wrapped =
      search::extract_features(func_of(lower::for_loop(u, 1, ForKind::Parallel, nest(u))));
  ASSERT_EQ(wrapped.size(), 1u);
  EXPECT_FEATURE(wrapped[0], "num_loops", 2);
  EXPECT_FEATURE(wrapped[0], "parallel_pos.none", 1);
  EXPECT_FEATURE(wrapped[0], "B0.unique_bytes", 256);
  // The index u*64 + ... costs one more int multiply-add per execution; everything else is equal.
  EXPECT_FEATURE(wrapped[0], "int_mad", 128);
  std::vector<float> w = wrapped[0], p = plain[0];
  const size_t int_mad = 7;
  ASSERT_EQ(feature_names()[int_mad], "int_mad");
  w[int_mad] = p[int_mad] = 0;
  EXPECT_EQ(w, p);
}

// for i in 0..4:
//   allocate acc[2]:
//     for j in 0..2: acc[j] = 0
//     for k in 0..8: vectorized for j in 0..2: acc[j] = acc[j] + A[i*8 + k] * B[k*2 + j]
//     for j in 0..2: C[i*2 + j] = acc[j]
TEST(Features, LocalAccumulatorOfAMatmul) {
  auto a = make_buffer("A", DType::Float32, 32), b = make_buffer("B", DType::Float32, 16);
  auto c = make_buffer("C", DType::Float32, 8), acc = make_buffer("acc", DType::Float32, 2, true);
  te::Expr i = te::var("i"), j0 = te::var("j0"), k = te::var("k"), j1 = te::var("j1"), j2 = te::var("j2");
  auto init = lower::for_loop(j0, 2, ForKind::Serial, lower::store(acc, j0, te::float_imm(0.0)));
  auto update = lower::for_loop(
      k, 8, ForKind::Serial,
      lower::for_loop(j1, 2, ForKind::Vectorized,
                      lower::store(acc, j1, lower::load(acc, j1) + lower::load(a, i * 8 + k) * lower::load(b, k * 2 + j1))));
  auto write = lower::for_loop(j2, 2, ForKind::Serial, lower::store(c, i * 2 + j2, lower::load(acc, j2)));
  auto body = lower::for_loop(i, 4, ForKind::Serial, lower::allocate(acc, lower::block({init, update, write})));
  const search::ProgramFeatures rows = search::extract_features(func_of(body));
  ASSERT_EQ(rows.size(), 3u);

  // The init: 8 executions, no arithmetic, so no intensity curve. acc is read again on each of i's
  // iterations (acc[j0] does not depend on i): reuse distance 2 iterations, 2 elements = 8 bytes.
  const std::vector<float>& r0 = rows[0];
  EXPECT_FEATURE(r0, "B0.write", 1);
  EXPECT_FEATURE(r0, "B0.bytes", 32);
  EXPECT_FEATURE(r0, "B0.unique_bytes", 8);
  EXPECT_FEATURE(r0, "B0.lines", 1);  // 8 * 4 / 64 = 0.5, at least one
  EXPECT_FEATURE(r0, "B0.reuse_loop_read", 1);
  EXPECT_FEATURE(r0, "B0.reuse_dis_iter", 2);
  EXPECT_FEATURE(r0, "B0.reuse_dis_bytes", 8);
  EXPECT_FEATURE(r0, "B0.reuse_ct", 4);
  EXPECT_FEATURE(r0, "alloc_size", 8);
  EXPECT_FEATURE(r0, "alloc_prod", 2 * 4);
  EXPECT_FEATURE(r0, "alloc_outer_prod", 4);
  EXPECT_FEATURE(r0, "alloc_inner_prod", 2);
  expect_rest_zero(r0, {"vec_pos.none", "unroll_pos.none", "parallel_pos.none", "B0.write", "B0.bytes",
                        "B0.unique_bytes", "B0.lines", "B0.unique_lines", "B0.reuse_loop_read", "B0.reuse_dis_iter",
                        "B0.reuse_dis_bytes", "B0.reuse_ct", "B0.bytes_d_reuse_ct", "B0.unique_bytes_d_reuse_ct",
                        "B0.lines_d_reuse_ct", "B0.unique_lines_d_reuse_ct", "B0.stride", "alloc_size", "alloc_prod",
                        "alloc_outer_prod", "alloc_inner_prod", "outer_prod", "num_loops"});

  // The update: 64 executions of one float multiply-add; A's and B's indices are one int
  // multiply-add each.
  const std::vector<float>& r1 = rows[1];
  EXPECT_FEATURE(r1, "float_mad", 64);
  EXPECT_FEATURE(r1, "float_addsub", 0);
  EXPECT_FEATURE(r1, "float_mul", 0);
  EXPECT_FEATURE(r1, "int_mad", 128);
  // j1 moves the accumulator (its only spatial loop inside the allocation): inner spatial.
  EXPECT_FEATURE(r1, "vec_pos.inner_spatial", 1);
  EXPECT_FEATURE(r1, "vec_len", 2);
  // acc (read-write): 64 * 4 = 256 bytes, 2 elements = 8 unique bytes, stride 1: 64*4/64 = 4 lines.
  // k does not move it: reused 8 times at distance 2 iterations of j1, which touched acc 2, A 1 and
  // B 2 elements = 20 bytes.
  EXPECT_FEATURE(r1, "B0.read_write", 1);
  EXPECT_FEATURE(r1, "B0.bytes", 256);
  EXPECT_FEATURE(r1, "B0.unique_bytes", 8);
  EXPECT_FEATURE(r1, "B0.lines", 4);
  EXPECT_FEATURE(r1, "B0.unique_lines", 1);
  EXPECT_FEATURE(r1, "B0.reuse_loop_read", 1);
  EXPECT_FEATURE(r1, "B0.reuse_dis_iter", 2);
  EXPECT_FEATURE(r1, "B0.reuse_dis_bytes", 20);
  EXPECT_FEATURE(r1, "B0.reuse_ct", 8);
  EXPECT_FEATURE(r1, "B0.stride", 1);
  // B (k*2 + j1): 4 lines as well, same bytes: after acc. 16 unique elements, contiguous: one line.
  // j1 and k move it; i does not: reused 4 times at 16 iterations, when the k loop has touched acc 2,
  // A 8, B 16 elements = 104 bytes.
  EXPECT_FEATURE(r1, "B1.read", 1);
  EXPECT_FEATURE(r1, "B1.unique_bytes", 64);
  EXPECT_FEATURE(r1, "B1.lines", 4);
  EXPECT_FEATURE(r1, "B1.unique_lines", 1);
  EXPECT_FEATURE(r1, "B1.reuse_loop_read", 1);
  EXPECT_FEATURE(r1, "B1.reuse_dis_iter", 16);
  EXPECT_FEATURE(r1, "B1.reuse_dis_bytes", 104);
  EXPECT_FEATURE(r1, "B1.reuse_ct", 4);
  // A (i*8 + k): j1 does not move it (reduce ratio 2), k does with stride 1: 64/2 * 4/64 = 2 lines,
  // and the stride of the innermost loop is 0. 32 unique elements = 128 bytes = 2 lines. Reused on
  // j1's 2 iterations at distance 1 iteration: one element each of acc, A, B = 12 bytes.
  EXPECT_FEATURE(r1, "B2.read", 1);
  EXPECT_FEATURE(r1, "B2.unique_bytes", 128);
  EXPECT_FEATURE(r1, "B2.lines", 2);
  EXPECT_FEATURE(r1, "B2.unique_lines", 2);
  EXPECT_FEATURE(r1, "B2.stride", 0);
  EXPECT_FEATURE(r1, "B2.reuse_loop_read", 1);
  EXPECT_FEATURE(r1, "B2.reuse_dis_iter", 1);
  EXPECT_FEATURE(r1, "B2.reuse_dis_bytes", 12);
  EXPECT_FEATURE(r1, "B2.reuse_ct", 2);
  EXPECT_FEATURE(r1, "alloc_inner_prod", 16);
  EXPECT_FEATURE(r1, "outer_prod", 64);
  EXPECT_FEATURE(r1, "num_loops", 3);

  // The write-back: C is moved by j2 and i, and no earlier statement in those loops touched C.
  const std::vector<float>& r2 = rows[2];
  EXPECT_FEATURE(r2, "B0.write", 1);
  EXPECT_FEATURE(r2, "B0.unique_bytes", 32);
  EXPECT_FEATURE(r2, "B0.reuse_none", 1);
  EXPECT_FEATURE(r2, "alloc_size", 0) << "C is a global buffer";
}

// for i in 0..16: { C[i] = A[i]; D[i] = C[i] * 2 }
TEST(Features, SerialReuseOfABufferWrittenThenRead) {
  auto a = make_buffer("A", DType::Float32, 16), c = make_buffer("C", DType::Float32, 16);
  auto d = make_buffer("D", DType::Float32, 16);
  te::Expr i = te::var("i");
  auto body = lower::for_loop(
      i, 16, ForKind::Serial,
      lower::block({lower::store(c, i, lower::load(a, i)), lower::store(d, i, lower::load(c, i) * te::float_imm(2.0))}));
  const search::ProgramFeatures rows = search::extract_features(func_of(body));
  ASSERT_EQ(rows.size(), 2u);
  const std::vector<float>& r = rows[1];
  EXPECT_FEATURE(r, "float_mul", 16);
  // D first (the store), then C: both one line, 64 bytes. i moves C (16 iterations); the loop holds
  // two touches of C (written above, read here): serial reuse, once, at a distance of
  // min(16, 16) / 16 = 1 iteration and (C 16 + A 16 + D 16 + C 16) * 4 / 16 = 16 bytes.
  EXPECT_FEATURE(r, "B1.read", 1);
  EXPECT_FEATURE(r, "B1.reuse_serial", 1);
  EXPECT_FEATURE(r, "B1.reuse_dis_iter", 1);
  EXPECT_FEATURE(r, "B1.reuse_dis_bytes", 16);
  EXPECT_FEATURE(r, "B1.reuse_ct", 1);
  EXPECT_FEATURE(r, "B1.bytes_d_reuse_ct", 64);
  EXPECT_FEATURE(r, "B0.reuse_none", 1);
}

// parallel for i in 0..4: { S[i] = 0; unrolled for r in 0..16: S[i] = S[i] + A[i*16 + r] }
TEST(Features, ReductionLoopPositions) {
  auto a = make_buffer("A", DType::Float32, 64), s = make_buffer("S", DType::Float32, 4);
  te::Expr i = te::var("i"), r = te::var("r");
  auto body = lower::for_loop(
      i, 4, ForKind::Parallel,
      lower::block({lower::store(s, i, te::float_imm(0.0)),
                    lower::for_loop(r, 16, ForKind::Unrolled, lower::store(s, i, lower::load(s, i) + lower::load(a, i * 16 + r)))}));
  const search::ProgramFeatures rows = search::extract_features(func_of(body));
  ASSERT_EQ(rows.size(), 2u);
  const std::vector<float>& u = rows[1];
  EXPECT_FEATURE(u, "float_addsub", 64);
  EXPECT_FEATURE(u, "int_mad", 64);
  // r reads A but does not move S: the only (so innermost) reduce loop. i moves S: inner spatial.
  EXPECT_FEATURE(u, "unroll_pos.inner_reduce", 1);
  EXPECT_FEATURE(u, "unroll_len", 16);
  EXPECT_FEATURE(u, "parallel_pos.inner_spatial", 1);
  // A first: r walks it with stride 1, 64 * 4 / 64 = 4 lines. S: r does not move it (ratio 16), i
  // does with stride 1: 64 / 16 * 4 / 64 = 0.25, at least one line; the innermost loop's stride is 0.
  EXPECT_FEATURE(u, "B0.read", 1);
  EXPECT_FEATURE(u, "B0.lines", 4);
  EXPECT_FEATURE(u, "B1.read_write", 1);
  EXPECT_FEATURE(u, "B1.lines", 1);
  EXPECT_FEATURE(u, "B1.stride", 0);
  // The init store sits in i only: no unrolled loop around it.
  EXPECT_FEATURE(rows[0], "unroll_pos.none", 1);
  EXPECT_FEATURE(rows[0], "parallel_pos.inner_spatial", 1);
}

// parallel for f in 0..8: vectorized for j in 0..4: C[(f / 2)*8 + (f % 2)*4 + j] = A[same]
// (a loop fused from a 4 x 2 nest).
TEST(Features, FusedLoopIsMixedAndItsDivisionsAreBounded) {
  auto a = make_buffer("A", DType::Float32, 32), c = make_buffer("C", DType::Float32, 32);
  te::Expr f = te::var("f"), j = te::var("j");
  auto index = [&] { return te::floordiv(f, te::int_imm(2)) * 8 + te::floormod(f, te::int_imm(2)) * 4 + j; };
  auto body = lower::for_loop(f, 8, ForKind::Parallel,
                              lower::for_loop(j, 4, ForKind::Vectorized, lower::store(c, index(), lower::load(a, index()))));
  const search::ProgramFeatures rows = search::extract_features(func_of(body));
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<float>& r = rows[0];
  // A's index per execution: (x*8 + y*4) + j: a multiply-add, a multiply, an add, a floordiv and a
  // floormod; 32 executions.
  EXPECT_FEATURE(r, "int_mad", 32);
  EXPECT_FEATURE(r, "int_mul", 32);
  EXPECT_FEATURE(r, "int_addsub", 32);
  EXPECT_FEATURE(r, "int_divmod", 64);
  EXPECT_FEATURE(r, "parallel_pos.mixed", 1);
  EXPECT_FEATURE(r, "vec_pos.inner_spatial", 1);
  // f / 2 in [0, 3] (stride 8) and f % 2 in [0, 1] (stride 4) with j (stride 1): all 32 elements,
  // contiguous: 128 bytes, 2 unique lines.
  EXPECT_FEATURE(r, "B0.unique_bytes", 128);
  EXPECT_FEATURE(r, "B0.unique_lines", 2);
  EXPECT_FEATURE(r, "B0.stride", 1);
}

// for i in 0..8: { for k in 0..3: S[i] = S[i] + A[i + k] ; D[i] = B[i] + B[i + 1] }
// (a sliding window, and one buffer read at two offsets).
TEST(Features, OverlappingAccessesCountEachElementOnce) {
  auto a = make_buffer("A", DType::Float32, 10), b = make_buffer("B", DType::Float32, 9);
  auto s = make_buffer("S", DType::Float32, 8), d = make_buffer("D", DType::Float32, 8);
  te::Expr i = te::var("i"), k = te::var("k");
  auto body = lower::for_loop(
      i, 8, ForKind::Serial,
      lower::block({lower::for_loop(k, 3, ForKind::Serial, lower::store(s, i, lower::load(s, i) + lower::load(a, i + k))),
                    lower::store(d, i, lower::load(b, i) + lower::load(b, i + te::int_imm(1)))}));
  const search::ProgramFeatures rows = search::extract_features(func_of(body));
  ASSERT_EQ(rows.size(), 2u);
  // A: k walks 3 elements and i shifts the window by 1: elements 0..9, 10 of them = 40 bytes (not
  // 8 * 3). Lines: 24 * 4 / 64 = 1.5 (stride 1); S: 24 / 3 (k does not move it) * 4/64 -> 1 line.
  EXPECT_FEATURE(rows[0], "B0.read", 1);
  EXPECT_FEATURE(rows[0], "B0.unique_bytes", 40);
  EXPECT_FEATURE(rows[0], "B0.lines", 1.5);
  // B: B[i] (0..7) and B[i + 1] (1..8) together touch 9 elements = 36 bytes.
  EXPECT_FEATURE(rows[1], "B1.read", 1);
  EXPECT_FEATURE(rows[1], "B1.unique_bytes", 36);
}

// A matmul 64x32 by 32x48 tiled by hand: C.split(i0, [8]), C.split(i1, [4]), reorder to
// (i0.0, i1.0, r0, i0.1, i1.1), parallel i0.0, vectorize i1.1, auto_unroll_max_step 64 on i0.0.
TEST(Features, TiledMatmulState) {
  using namespace state::testing;
  state::State s(matmul_dag(64, 32, 48));
  s.apply(split(2, 0, {8}));
  s.apply(split(2, 2, {4}));
  s.apply(reorder(2, {0, 2, 4, 1, 3}));
  s.apply(annotate(2, 0, state::IteratorAnnotation::Parallel));
  s.apply(annotate(2, 4, state::IteratorAnnotation::Vectorize));
  s.apply(pragma(2, 0, "auto_unroll_max_step$64"));
  const lower::LoweredFunc f = lower::lower_state_func(s, "mm");
  const search::ProgramFeatures rows = search::state_features(s);
  ASSERT_EQ(rows.size(), 2u) << lower::print_func(f);  // the accumulator's init and its update
  ASSERT_EQ(rows.size(), count_stores(f.body));
  const std::vector<float>& u = rows[1];
  // 64*48*32 = 98304 multiply-adds over 5 loops.
  EXPECT_FEATURE(u, "float_mad", 98304);
  EXPECT_FEATURE(u, "outer_prod", 98304);
  EXPECT_FEATURE(u, "num_loops", 5);
  // Auto-unroll 64 unrolls i0.1 (8 x 4 = 32 iterations with i1.1 inside); its stride in C (48) lies
  // between i1.1's (1) and i0.0's (384): middle spatial. i1.1 is inner spatial, i0.0 outer.
  EXPECT_FEATURE(u, "auto_unroll_max_step", 64);
  EXPECT_FEATURE(u, "unroll_len", 8);
  EXPECT_FEATURE(u, "unroll_pos.middle_spatial", 1);
  EXPECT_FEATURE(u, "vec_pos.inner_spatial", 1);
  EXPECT_FEATURE(u, "vec_len", 4);
  EXPECT_FEATURE(u, "parallel_pos.outer_spatial", 1);
  EXPECT_FEATURE(u, "parallel_len", 8);
  // A crosses the most lines: i1.1 does not move it (ratio 4), i0.1 moves it by 32 elements (a
  // full line each): 98304 / 4 = 24576 lines. All of A is touched: 8192 bytes. Reused on i1.1's 4
  // iterations at distance 1 iteration, one element of C, A, B = 12 bytes.
  EXPECT_FEATURE(u, "B0.read", 1);
  EXPECT_FEATURE(u, "B0.lines", 24576);
  EXPECT_FEATURE(u, "B0.unique_bytes", 8192);
  EXPECT_FEATURE(u, "B0.stride", 0);
  EXPECT_FEATURE(u, "B0.reuse_loop_read", 1);
  EXPECT_FEATURE(u, "B0.reuse_dis_iter", 1);
  EXPECT_FEATURE(u, "B0.reuse_dis_bytes", 12);
  EXPECT_FEATURE(u, "B0.reuse_ct", 4);
  // C (read-write) and B tie at 98304 * 4 / 64 = 6144 lines and equal bytes: C, the store, first.
  EXPECT_FEATURE(u, "B1.read_write", 1);
  EXPECT_FEATURE(u, "B1.lines", 6144);
  EXPECT_FEATURE(u, "B1.unique_bytes", 64 * 48 * 4);
  EXPECT_FEATURE(u, "B2.read", 1);
  EXPECT_FEATURE(u, "B2.unique_bytes", 32 * 48 * 4);
  // The init store inherits the same pragma.
  EXPECT_FEATURE(rows[0], "auto_unroll_max_step", 64);
  // Without the state, lowering's unrolled loops remain but the pragma's value is unknown.
  EXPECT_FEATURE(search::extract_features(f)[1], "auto_unroll_max_step", 0);
  EXPECT_FEATURE(search::extract_features(f)[1], "unroll_len", 8);
}

// The search extracts on all cores at once: threads sharing one program get the serial answer.
TEST(Features, ConcurrentExtractionMatchesSerial) {
  using namespace state::testing;
  state::State s(matmul_dag(64, 32, 48));
  s.apply(split(2, 0, {8}));
  s.apply(annotate(2, 0, state::IteratorAnnotation::Parallel));
  const lower::LoweredFunc f = lower::lower_state_func(s, "mm");
  const search::ProgramFeatures want = search::extract_features(f);
  std::vector<search::ProgramFeatures> got(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) got[t] = k % 2 ? search::extract_features(f) : search::state_features(s);
    });
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

std::vector<state::State> sampled_programs(const std::vector<te::TensorRef>& outs, int n, uint64_t seed) {
  state::State initial(std::make_shared<te::ComputeDAG>(te::make_dag(outs)));
  std::vector<state::State> sketches = sketch::generate_sketches(initial, sketch::SearchParams{});
  sketch::Rng rng(seed);
  std::vector<state::State> out;
  for (int k = 0; k < n; ++k) out.push_back(sketch::sample_program(sketches, sketch::SearchParams{}, rng));
  return out;
}

// KILN_DUMP_FEATURES=1 prints each sampled program with the non-zero raw values of its rows.
void dump(const lower::LoweredFunc& f, const search::ProgramFeatures& rows) {
  std::cout << lower::print_func(f);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::cout << "row " << r << ":";
    for (size_t k = 0; k < rows[r].size(); ++k)
      if (rows[r][k] != 0) std::cout << " " << feature_names()[k] << "=" << std::exp2(rows[r][k]) - 1;
    std::cout << "\n";
  }
}

// Rows = stores for sampled programs, every value finite; prints the time per program (lowering
// included), which the search pays for thousands of candidates per round.
void check_and_time(const std::string& what, const std::vector<state::State>& programs) {
  using clock = std::chrono::steady_clock;
  double lower_s = 0, extract_s = 0;
  for (const state::State& s : programs) {
    auto t0 = clock::now();
    const lower::LoweredFunc f = lower::lower_state_func(s, "p");
    auto t1 = clock::now();
    const search::ProgramFeatures rows = search::extract_features(f);
    auto t2 = clock::now();
    lower_s += std::chrono::duration<double>(t1 - t0).count();
    extract_s += std::chrono::duration<double>(t2 - t1).count();
    ASSERT_EQ(rows.size(), count_stores(f.body)) << lower::print_func(f);
    ASSERT_GT(rows.size(), 0u);
    for (const auto& row : rows) {
      ASSERT_EQ(row.size(), static_cast<size_t>(kFeaturesPerStore));
      for (float v : row) ASSERT_TRUE(std::isfinite(v)) << lower::print_func(f);
    }
    EXPECT_EQ(search::state_features(s).size(), rows.size());
    if (std::getenv("KILN_DUMP_FEATURES")) dump(f, search::state_features(s));
  }
  const double n = static_cast<double>(programs.size());
  std::cout << "[ features ] " << what << ": lowering " << lower_s / n * 1e6 << " us, extraction " << extract_s / n * 1e6
            << " us per program (" << programs.size() << " programs)\n";
}

TEST(Features, SampledMatmulProgramsHaveOneRowPerStore) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  check_and_time("matmul 512^3", sampled_programs({state::testing::matmul(a, b)}, 40, 3));
}

TEST(Features, SampledConvProgramsHaveOneRowPerStore) {
  // ResNet-50's 3x3 layer: 1x64x56x56, 64 filters, padding 1, with bias and ReLU.
  auto x = te::placeholder("X", DType::Float32, {1, 64, 56, 56});
  auto w = te::placeholder("W", DType::Float32, {64, 64, 3, 3});
  auto bias = te::placeholder("bias", DType::Float32, {64});
  auto pad = te::compute("pad", "injective", DType::Float32, {1, 64, 58, 58}, [&](const std::vector<te::Expr>& i) {
    te::Expr inside = i[2] >= te::int_imm(1) && i[2] < te::int_imm(57) && i[3] >= te::int_imm(1) && i[3] < te::int_imm(57);
    return te::select(inside, te::at(x, {i[0], i[1], i[2] - 1, i[3] - 1}), te::float_imm(0.0));
  });
  auto conv = te::reduce("conv", "conv", DType::Float32, {1, 64, 56, 56}, te::Reducer::Sum, {64, 3, 3},
                         [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                           return te::at(pad, {i[0], r[0], i[2] + r[1], i[3] + r[2]}) * te::at(w, {i[1], r[0], r[1], r[2]});
                         });
  auto out = te::compute("out", "elementwise", DType::Float32, conv->shape, [&](const std::vector<te::Expr>& i) {
    return te::max(te::at(conv, i) + te::at(bias, {i[1]}), te::float_imm(0.0));
  });
  check_and_time("conv 3x3 64x56x56", sampled_programs({out}, 40, 5));
}

}  // namespace
}  // namespace kiln
