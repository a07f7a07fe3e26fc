// The default GPU schedule (scheduler/lower/lower_gpu): one thread per output element, each stage a
// kernel of a blockIdx.x loop around a threadIdx.x loop, guarded when the threads do not divide the
// elements; a whole model lowers to kernels only. Whether the kernels compute the model is checked by
// the gpu-serial conformance tests (tests/conformance), which run them thread after thread on the CPU.
#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "scheduler/lower/lower_gpu.h"
#include "scheduler/te/substitute.h"
#include "tests/frontend/partition/partition_models.h"

namespace kiln {
namespace {

using lower::ForKind;
using lower::Stmt;
using lower::StmtKind;

Stmt copy_of(int64_t n, const te::Expr& i) {
  auto src = lower::make_buffer("src", DType::Float32, n), dst = lower::make_buffer("dst", DType::Float32, n);
  return lower::store(dst, i, lower::load(src, i));
}

TEST(LowerGpu, ThreadsCoverTheElementsWithAGuardOnlyWhenTheyDoNotDivideThem) {
  struct Case {
    int64_t n, grid, block;
    bool guarded;
  };
  for (Case c : {Case{512, 2, 256, false}, Case{300, 2, 256, true}, Case{40, 1, 64, true}, Case{32, 1, 32, false}}) {
    te::Expr i = te::var("i");
    Stmt k = lower::over_gpu_threads(i, c.n, copy_of(c.n, i), {});
    ASSERT_EQ(k->kind, StmtKind::For);
    EXPECT_EQ(k->for_kind, ForKind::GpuBlock);
    EXPECT_EQ(k->extent, c.grid) << c.n;
    const Stmt& t = k->body[0];
    EXPECT_EQ(t->for_kind, ForKind::GpuThread);
    EXPECT_EQ(t->extent, c.block) << c.n;
    EXPECT_EQ(t->body[0]->kind == StmtKind::IfThenElse, c.guarded) << c.n;
    // The flat index is rebuilt from the block and the thread: the old variable is gone.
    const Stmt& st = c.guarded ? t->body[0]->body[0] : t->body[0];
    ASSERT_EQ(st->kind, StmtKind::Store);
    EXPECT_FALSE(te::mentions(st->index, i.get())) << lower::print_stmt(k);
    EXPECT_TRUE(te::mentions(st->index, t->var.get())) << lower::print_stmt(k);
  }
}

TEST(LowerGpu, AModelLowersToKernelsOnly) {
  Graph g = testing::load_built(testing::attention_model());
  SubgraphDAG sdag = partition_graph(g);
  lower::GpuScheduleParams p;
  lower::ModelProgram prog = lower::lower_model(g, sdag, "k", lower::gpu_subgraph_scheduler(p));
  Stmt body = lower::gpu_kernels_only(prog.func.body, p);
  ASSERT_EQ(body->kind, StmtKind::Block);
  int kernels = 0;
  for (const Stmt& s : body->body) {
    if (s->kind == StmtKind::Block && s->body.empty()) continue;
    ASSERT_EQ(s->kind, StmtKind::For) << lower::print_stmt(s);
    EXPECT_EQ(s->for_kind, ForKind::GpuBlock);
    EXPECT_EQ(s->body[0]->for_kind, ForKind::GpuThread);
    EXPECT_LE(s->body[0]->extent, p.threads_per_block);
    ++kernels;
  }
  EXPECT_GE(kernels, 3);
}

TEST(LowerGpu, AStatementThatIsNeitherAKernelNorACopyIsAnError) {
  Stmt not_a_kernel = lower::block({lower::block({copy_of(4, te::int_imm(0)), copy_of(4, te::int_imm(1))})});
  EXPECT_THROW(lower::gpu_kernels_only(not_a_kernel, {}), Error);
}

TEST(LowerGpu, ASerialCopyLoopBecomesAKernel) {
  te::Expr i = te::var("i");
  Stmt body = lower::gpu_kernels_only(lower::block({lower::for_loop(i, 1000, ForKind::Vectorized, copy_of(1000, i))}), {});
  ASSERT_EQ(body->body.size(), 1u);
  EXPECT_EQ(body->body[0]->for_kind, ForKind::GpuBlock);
  EXPECT_EQ(body->body[0]->extent, 4);
}

}  // namespace
}  // namespace kiln
