// Shared-memory block tiles for GPU matmuls and convolutions (scheduler/lower/gpu_shared_tiles.h): the
// tile chosen for a large matmul, the stages that keep the default GPU schedule, the kernel's phases,
// with and without chunk prefetch, and that kernels run thread after thread on the CPU (JIT) compute
// what the evaluator computes, prefetching or not:
// box edges that the threads do not divide, a transposed operand (its padded box), strided and
// padded convolutions whose boxes are clamped into the input, and an epilogue.
#include <gtest/gtest.h>

#include "scheduler/lower/gpu_shared_tiles.h"
#include "scheduler/te/substitute.h"
#include "tests/scheduler/lower/gpu_stage_kernel.h"
#include "tests/scheduler/lower/lowered_error.h"

namespace kiln {
namespace {

using te::Expr;
using te::int_imm;

te::TensorRef matmul(int64_t m, int64_t n, int64_t k, bool b_transposed = false) {
  te::TensorRef a = te::placeholder("a", DType::Float32, {m, k});
  te::TensorRef b = te::placeholder("b", DType::Float32, b_transposed ? Shape{n, k} : Shape{k, n});
  return te::reduce("mm", "matmul", DType::Float32, {m, n}, te::Reducer::Sum, {k},
                    [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                      return te::at(a, {o[0], r[0]}) * (b_transposed ? te::at(b, {o[1], r[0]}) : te::at(b, {r[0], o[1]}));
                    });
}

// A c -> m conv with a k x k window, stride `stride`, padding `pad` read through a select around the
// load (so the block's boxes reach outside the input and are clamped).
te::TensorRef conv(int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride, int64_t pad) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {2, c, hw, hw});
  te::TensorRef w = te::placeholder("w", DType::Float32, {m, c, k, k});
  const int64_t out = (hw + 2 * pad - k) / stride + 1;
  return te::reduce("conv", "conv", DType::Float32, {2, m, out, out}, te::Reducer::Sum, {c, k, k},
                    [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                      Expr y = o[2] * int_imm(stride) + r[1] - int_imm(pad), xx = o[3] * int_imm(stride) + r[2] - int_imm(pad);
                      Expr inside = y >= int_imm(0) && y < int_imm(hw) && xx >= int_imm(0) && xx < int_imm(hw);
                      return te::select(inside, te::at(x, {o[0], r[0], y, xx}), te::const_of(DType::Float32, 0)) *
                             te::at(w, {o[1], r[0], r[1], r[2]});
                    });
}

// The stage of `out` as one shared-tile kernel (with an epilogue when given: the stored value is
// epilogue(acc, output index)).
lower::LoweredFunc kernel_of(const te::TensorRef& out, const lower::GpuSharedTile& tile,
                             const lower::Epilogue* epilogue = nullptr) {
  return testing::gpu_stage_kernel(epilogue ? epilogue->out : out, [&](const auto& buffers) {
    return lower::lower_stage_gpu_shared(out, tile, buffers, epilogue);
  });
}

lower::GpuSharedTile tile_of(std::vector<int64_t> block, std::vector<int64_t> thread_tile, int64_t k_chunk,
                             bool prefetch = false) {
  return {std::move(block), std::move(thread_tile), k_chunk, prefetch};
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(GpuSharedTiles, ALargeMatmulTakes128By128BlocksOf8By8ThreadTiles) {
  const te::TensorRef mm = matmul(4096, 4096, 4096);
  const std::optional<lower::GpuSharedTile> t = lower::choose_shared_tile(*mm->stage, {});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->block, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(t->thread_tile, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(t->threads(), 256);
  EXPECT_EQ(t->k_chunk, 16);  // two 128 x 16 boxes, A's transposed and padded: 16.3 KiB
}

TEST(GpuSharedTiles, ASmallLayerKeepsEnoughBlocksForEveryMultiprocessor) {
  // 128 x 768 outputs (BERT at batch 1): 4 x 4 tiles would leave 24 blocks of 256 threads for 132
  // multiprocessors; the tile keeps at least half the parallelism one thread per output has.
  const te::TensorRef mm = matmul(128, 768, 768);
  const std::optional<lower::GpuSharedTile> t = lower::choose_shared_tile(*mm->stage, {});
  ASSERT_TRUE(t);
  const int64_t blocks = (128 / t->block[0]) * (768 / t->block[1]);
  EXPECT_GE(blocks * t->threads(), 128 * 768 / 2);
  EXPECT_GE(blocks, 132 / 2);
}

TEST(GpuSharedTiles, ShortReductionsGathersAndOtherStagesKeepTheDefaultSchedule) {
  EXPECT_FALSE(lower::choose_shared_tile(*matmul(256, 256, 8)->stage, {}));  // nothing to stage
  te::TensorRef x = te::placeholder("x", DType::Float32, {64, 64});
  te::TensorRef grouped = te::reduce("g", "conv", DType::Float32, {64, 64}, te::Reducer::Sum, {64},
                                     [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                       return te::at(x, {te::floordiv(o[0], int_imm(2)), r[0]});
                                     });
  EXPECT_FALSE(lower::choose_shared_tile(*grouped->stage, {}));  // not affine in the output axis
  te::TensorRef rows = te::reduce("sum", "reduction", DType::Float32, {64, 64}, te::Reducer::Sum, {64},
                                  [&](const std::vector<Expr>& o, const std::vector<Expr>& r) { return te::at(x, {o[0], r[0]}); });
  EXPECT_FALSE(lower::choose_shared_tile(*rows->stage, {}));  // not a matmul or conv: no reuse to stage
  lower::GpuScheduleParams no_room;
  no_room.shared_bytes = 16;  // less than any block of 32 threads stages
  EXPECT_FALSE(lower::choose_shared_tile(*matmul(256, 256, 256)->stage, no_room));
}

TEST(GpuSharedTiles, AKernelStagesEachChunkBetweenTwoBarriers) {
  const lower::LoweredFunc f = kernel_of(matmul(64, 64, 64), tile_of({32, 32}, {4, 2}, 16));
  const std::string text = lower::print_func(f);
  EXPECT_EQ(count(text, "allocate shared"), 2) << text;
  EXPECT_EQ(count(text, "allocate per-thread mm.acc: float32[8]"), 1) << text;
  EXPECT_EQ(count(text, "barrier"), 2) << text;
  EXPECT_EQ(count(text, "threadIdx.x for"), 4) << text;  // init, fetch, compute, store
  EXPECT_EQ(count(text, "threadIdx.x for mm.fetch in 0..128"), 1) << text;
  EXPECT_EQ(count(text, "for mm.ko in 0..4"), 1) << text;
  EXPECT_EQ(count(text, "blockIdx.x for mm.b in 0..4"), 1) << text;
}

// With chunk prefetch, chunk 0 is copied before the loop; each iteration loads the next chunk into
// per-thread registers (4 elements of each 32 x 16 box for each of 128 threads), computes, waits, and
// stores them into shared memory; the last iteration has no next chunk.
TEST(GpuSharedTiles, APrefetchingKernelLoadsTheNextChunkBeforeTheFmas) {
  const lower::LoweredFunc f = kernel_of(matmul(64, 64, 64), tile_of({32, 32}, {4, 2}, 16, true));
  const std::string text = lower::print_func(f);
  EXPECT_EQ(count(text, "allocate per-thread mm.r0: float32[4]"), 1) << text;
  EXPECT_EQ(count(text, "allocate per-thread mm.r1: float32[4]"), 1) << text;
  EXPECT_EQ(count(text, "barrier"), 3) << text;
  EXPECT_EQ(count(text, "threadIdx.x for"), 6) << text;  // init, fetch, load, compute, store to shared, store out
  const size_t load = text.find("threadIdx.x for mm.load"), compute = text.find("threadIdx.x for mm.compute"),
               store = text.find("threadIdx.x for mm.store"), loop = text.find("for mm.ko in 0..4");
  ASSERT_NE(load, std::string::npos) << text;
  EXPECT_LT(loop, load);
  EXPECT_LT(load, compute);
  EXPECT_LT(compute, store);
  // The tuner's space offers prefetch beside each tile where there are two chunks or more and a thread
  // copies at most 16 elements of each box: not for one chunk, nor for 32 x 64 boxes over 64 threads.
  const std::vector<lower::GpuSharedTile> space = lower::shared_tile_space(*matmul(64, 64, 128)->stage, {});
  const auto offered = [&](lower::GpuSharedTile t) {
    t.prefetch = true;
    return std::find(space.begin(), space.end(), t) != space.end();
  };
  EXPECT_TRUE(offered(tile_of({32, 32}, {4, 2}, 16)));
  EXPECT_FALSE(offered(tile_of({32, 32}, {4, 2}, 128)));
  EXPECT_FALSE(offered(tile_of({64, 64}, {8, 8}, 32)));
  EXPECT_TRUE(std::find(space.begin(), space.end(), tile_of({64, 64}, {8, 8}, 32)) != space.end());
  // The default rule prefetches only when asked to (GpuScheduleParams::prefetch_chunks).
  lower::GpuScheduleParams p;
  EXPECT_FALSE(lower::choose_shared_tile(*matmul(4096, 4096, 4096)->stage, p)->prefetch);
  p.prefetch_chunks = true;
  EXPECT_TRUE(lower::choose_shared_tile(*matmul(4096, 4096, 4096)->stage, p)->prefetch);
}

struct Case {
  const char* name;
  te::TensorRef out;
  lower::GpuSharedTile tile;
};

TEST(GpuSharedTiles, KernelsRunThreadAfterThreadComputeWhatTheEvaluatorComputes) {
  const std::vector<Case> cases = {
      {"matmul", matmul(64, 96, 80), tile_of({32, 32}, {4, 4}, 16)},
      // 24 x 8 + 8 x 24 elements per chunk over 48 threads: the fetch's last step is guarded
      {"matmul, boxes the threads do not divide", matmul(48, 48, 40), tile_of({24, 24}, {4, 3}, 8)},
      {"matmul, one chunk", matmul(32, 32, 32), tile_of({16, 32}, {2, 2}, 32)},
      {"matmul, transposed operand", matmul(64, 64, 48, true), tile_of({32, 32}, {2, 4}, 8)},
      {"conv 3x3, padding 1", conv(8, 16, 10, 3, 1, 1), tile_of({1, 8, 5, 10}, {1, 2, 1, 2}, 4)},
      {"conv 3x3, stride 2, padding 1", conv(6, 8, 11, 3, 2, 1), tile_of({1, 8, 3, 6}, {1, 4, 1, 1}, 3)},
      {"conv 1x1", conv(32, 32, 8, 1, 1, 0), tile_of({1, 32, 4, 8}, {1, 4, 1, 2}, 8)},
  };
  for (const Case& c : cases)
    for (bool prefetch : {false, true}) {
      lower::GpuSharedTile t = c.tile;
      t.prefetch = prefetch;
      if (prefetch && c.out->stage->reduce_axes[0].extent == t.k_chunk) continue;  // one chunk: no next one
      const lower::LoweredFunc f = kernel_of(c.out, t);
      EXPECT_LT(testing::max_error(f, te::make_dag({c.out})), 1e-4) << c.name << (prefetch ? " (prefetch)" : "") << "\n"
                                                                     << lower::print_func(f);
    }
  // The tile choose_shared_tile makes for each of them, too.
  for (const Case& c : cases) {
    lower::GpuScheduleParams p;
    p.min_threads = 256;
    p.multiprocessors = 2;
    const std::optional<lower::GpuSharedTile> t = lower::choose_shared_tile(*c.out->stage, p);
    ASSERT_TRUE(t) << c.name;
    const lower::LoweredFunc f = kernel_of(c.out, *t);
    EXPECT_LT(testing::max_error(f, te::make_dag({c.out})), 1e-4) << c.name << " (chosen tile)\n" << lower::print_func(f);
  }
}

// The random GPU programs: each seed draws a tile from all that fit (or none) and a chunk; every draw
// is checked thread-serially against the evaluator, as random CPU programs are.
TEST(GpuSharedTiles, RandomTilesComputeWhatTheEvaluatorComputes) {
  const std::vector<te::TensorRef> stages = {matmul(64, 96, 80), matmul(48, 48, 40, true), conv(8, 16, 10, 3, 1, 1),
                                             conv(6, 8, 11, 3, 2, 1), conv(32, 32, 8, 1, 1, 0)};
  int tiled = 0;
  for (const te::TensorRef& out : stages)
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const std::optional<lower::GpuSharedTile> t = lower::random_shared_tile(*out->stage, {}, seed);
      if (!t) continue;
      ++tiled;
      const lower::LoweredFunc f = kernel_of(out, *t);
      EXPECT_LT(testing::max_error(f, te::make_dag({out})), 1e-4) << out->name << " seed " << seed << "\n"
                                                                   << lower::print_func(f);
    }
  EXPECT_GE(tiled, 30);  // "none" is one choice among many
}

TEST(GpuSharedTiles, TheEpilogueIsAppliedToEachAccumulatorBeforeTheStore) {
  const te::TensorRef mm = matmul(32, 64, 48);
  te::TensorRef bias = te::placeholder("bias", DType::Float32, {64});
  te::TensorRef relu = te::compute("relu", "elementwise", DType::Float32, {32, 64}, [&](const std::vector<Expr>& i) {
    return te::binary(te::ExprOp::Max, te::at(mm, i) + te::at(bias, {i[1]}), te::const_of(DType::Float32, 0));
  });
  const Expr value = te::var("v", DType::Float32);
  lower::Epilogue e{relu, value, te::binary(te::ExprOp::Max, value + te::at(bias, {relu->stage->axes[1]}), te::const_of(DType::Float32, 0))};
  // The epilogue's expression reads relu's own axes; rename them to the matmul's, as plan_epilogues does.
  std::map<const te::ExprNode*, Expr> to_mm;
  for (size_t a = 0; a < 2; ++a) to_mm[relu->stage->axes[a].get()] = mm->stage->axes[a];
  e.expr = te::substitute(e.expr, to_mm);
  const lower::LoweredFunc f = kernel_of(mm, tile_of({16, 32}, {2, 2}, 16), &e);
  EXPECT_LT(testing::max_error(f, te::make_dag({relu})), 1e-4) << lower::print_func(f);
}

}  // namespace
}  // namespace kiln
