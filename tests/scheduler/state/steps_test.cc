// Each transform step on small DAGs, checked by the printed loop nest (bound inference included) and
// the printed step list: split extents (dividing or not), fuse names, reorder, annotations and
// pragmas, compute-at shrinking the producer to one tile, attachments following split and fused
// targets, inlining, storage alignment, follow-splits, and the stage-inserting steps' numbering and
// computations. Also: a copied State is independent of the original (copy-on-write).
#include <gtest/gtest.h>

#include "scheduler/state/state.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln::state {
namespace {

using namespace testing;  // NOLINT: the DAG builders and step shorthands

State apply_all(const DagRef& dag, const std::vector<StepRef>& steps) {
  State s(dag);
  for (const StepRef& st : steps) s.apply(st);
  return s;
}

constexpr int A = 0, B = 1, C = 2, D = 3;  // matmul_relu_dag's stages

std::string print_dag_init(const State& s, int stage) { return te::print_expr(s.stage(stage).op->init); }

TEST(StateSteps, InitialStateHasOneLoopPerAxisThenPerReductionAxis) {
  State s(matmul_relu_dag());
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    for r0 (0,32)\n"
            "      C sum= ...\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    D = ...\n");
  EXPECT_EQ(s.stage_id("D"), D);
  EXPECT_EQ(print_steps(s), "");
}

TEST(StateSteps, SplitExtentsDivisibleAndNot) {
  State s = apply_all(matmul_dag(), {split(C, 0, {16}), split(C, 2, {5})});
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0 (0,4)\n"
            "  for i0.1 (0,16)\n"
            "    for i1.0 (0,10)\n"  // 48 = 10 * 5 - 2: the last tile is guarded
            "      for i1.1 (0,5)\n"
            "        for r0 (0,32)\n"
            "          C sum= ...\n");
  EXPECT_EQ(print_steps(s), "C.split(i0, [16])\nC.split(i1, [5])\n");
  EXPECT_FALSE(s.has_undefined_lengths());
}

TEST(StateSteps, SplitIntoThreeAndByOuterLengths) {
  State s = apply_all(matmul_dag(), {split(C, 0, {4, 2}), split(C, 3, {6}, /*inner_to_outer=*/false)});
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0 (0,8)\n"
            "  for i0.1 (0,4)\n"
            "    for i0.2 (0,2)\n"
            "      for i1.0 (0,6)\n"
            "        for i1.1 (0,8)\n"
            "          for r0 (0,32)\n"
            "            C sum= ...\n");
  EXPECT_EQ(print_steps(s), "C.split(i0, [4, 2])\nC.split(i1, [6], nparts)\n");
}

TEST(StateSteps, UnchosenSplitLengthsPrintAsQuestionMarks) {
  State s = apply_all(matmul_dag(), {split(C, 0, {std::nullopt, 4})});
  EXPECT_TRUE(s.has_undefined_lengths());
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0 (0,?)\n"
            "  for i0.1 (0,?)\n"
            "    for i0.2 (0,4)\n"
            "      for i1 (0,48)\n"
            "        for r0 (0,32)\n"
            "          C sum= ...\n");
  EXPECT_EQ(print_steps(s), "C.split(i0, [?, 4])\n");
}

TEST(StateSteps, FuseNamesTheLoopAfterItsPartsAndMultipliesExtents) {
  State s = apply_all(matmul_dag(), {split(C, 1, {16}), fuse(C, {0, 1})});
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0@i1.0@ (0,192)\n"
            "  for i1.1 (0,16)\n"
            "    for r0 (0,32)\n"
            "      C sum= ...\n");
  EXPECT_EQ(print_steps(s), "C.split(i1, [16])\nC.fuse(i0, i1.0)\n");
}

TEST(StateSteps, ReorderAnnotationsAndPragma) {
  State s = apply_all(matmul_dag(), {split(C, 0, {16}), split(C, 2, {8}), reorder(C, {0, 2, 4, 1, 3}),
                                     annotate(C, 0, IteratorAnnotation::Parallel),
                                     annotate(C, 4, IteratorAnnotation::Vectorize),
                                     annotate(C, 3, IteratorAnnotation::Unroll), pragma(C, 0, "auto_unroll_max_step$16")});
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "parallel i0.0 (0,4) [auto_unroll_max_step=16]\n"
            "  for i1.0 (0,6)\n"
            "    for r0 (0,32)\n"
            "      unroll i0.1 (0,16)\n"
            "        vectorize i1.1 (0,8)\n"
            "          C sum= ...\n");
  EXPECT_EQ(print_steps(s),
            "C.split(i0, [16])\n"
            "C.split(i1, [8])\n"
            "C.reorder(i0.0, i1.0, r0, i0.1, i1.1)\n"
            "C.parallel(i0.0)\n"
            "C.vectorize(i1.1)\n"
            "C.unroll(i0.1)\n"
            "C.pragma(i0.0, \"auto_unroll_max_step$16\")\n");
}

TEST(StateSteps, GpuBindingsPrintTheirIndexNames) {
  State s = apply_all(matmul_dag(), {annotate(C, 0, IteratorAnnotation::BlockX), annotate(C, 1, IteratorAnnotation::ThreadX)});
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "blockIdx.x i0 (0,64)\n"
            "  threadIdx.x i1 (0,48)\n"
            "    for r0 (0,32)\n"
            "      C sum= ...\n");
}

// relu(matmul) tiled 8x16; the matmul computed at the relu's i1.0 loop computes one 8x16 tile there.
TEST(StateSteps, ComputeAtShrinksTheProducerToOneTile) {
  State s = apply_all(matmul_relu_dag(), {split(D, 0, {8}), split(D, 2, {16}), reorder(D, {0, 2, 1, 3}), compute_at(C, D, 1)});
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0 (0,8)\n"
            "  for i1.0 (0,3)\n"
            "    for i0 (0,8)\n"
            "      for i1 (0,16)\n"
            "        for r0 (0,32)\n"
            "          C sum= ...\n"
            "    for i0.1 (0,8)\n"
            "      for i1.1 (0,16)\n"
            "        D = ...\n");
  EXPECT_EQ(print_steps(s).substr(print_steps(s).rfind("C.")), "C.compute_at(D, i1.0)\n");
  // The state itself keeps the full domain; only bound inference shrinks it.
  EXPECT_EQ(s.stage(C).nodes[0].extent, 64);
}

TEST(StateSteps, AttachmentMovesToTheInnerPartWhenTheTargetLoopIsSplit) {
  State s = apply_all(matmul_relu_dag(), {compute_at(C, D, 0), split(D, 0, {8})});
  EXPECT_EQ(s.stage(C).attach_node, s.stage(D).iters[1].node);
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0 (0,8)\n"
            "  for i0.1 (0,8)\n"
            "    for i0 (0,1)\n"
            "      for i1 (0,48)\n"
            "        for r0 (0,32)\n"
            "          C sum= ...\n"
            "    for i1 (0,48)\n"
            "      D = ...\n");
}

TEST(StateSteps, AttachmentMovesToTheFusedLoop) {
  State s = apply_all(matmul_relu_dag(),
                      {split(D, 0, {8}), split(D, 2, {16}), reorder(D, {0, 2, 1, 3}), compute_at(C, D, 1), fuse(D, {0, 1})});
  EXPECT_EQ(s.stage(C).attach_node, s.stage(D).iters[0].node);
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0@i1.0@ (0,24)\n"
            "  for i0 (0,8)\n"
            "    for i1 (0,16)\n"
            "      for r0 (0,32)\n"
            "        C sum= ...\n"
            "  for i0.1 (0,8)\n"
            "    for i1.1 (0,16)\n"
            "      D = ...\n");
}

TEST(StateSteps, ComputeInlineHidesTheStageAndComputeRootRestoresTheWholeDomain) {
  constexpr int P = 2, O = 3;
  State inlined = apply_all(conv_dag(), {compute_inline(P)});
  EXPECT_EQ(print_state(inlined),
            "Placeholder: X, W\n"
            "for i0 (0,1)\n"
            "  for i1 (0,4)\n"
            "    for i2 (0,8)\n"
            "      for i3 (0,8)\n"
            "        for r0 (0,3)\n"
            "          for r1 (0,3)\n"
            "            for r2 (0,3)\n"
            "              O sum= ...\n");
  // Per output row the conv reads 3 channels, 3 padded rows and every padded column.
  State at_row = apply_all(conv_dag(), {compute_at(P, O, 2)});
  EXPECT_EQ(print_state(at_row),
            "Placeholder: X, W\n"
            "for i0 (0,1)\n"
            "  for i1 (0,4)\n"
            "    for i2 (0,8)\n"
            "      for i0 (0,1)\n"
            "        for i1 (0,3)\n"
            "          for i2 (0,3)\n"
            "            for i3 (0,10)\n"
            "              P = ...\n"
            "      for i3 (0,8)\n"
            "        for r0 (0,3)\n"
            "          for r1 (0,3)\n"
            "            for r2 (0,3)\n"
            "              O sum= ...\n");
  at_row.apply(compute_root(P));
  EXPECT_EQ(print_state(at_row), print_state(State(conv_dag())));
  EXPECT_EQ(print_steps(at_row), "P.compute_at(O, i2)\nP.compute_root()\n");
}

TEST(StateSteps, StorageAlignRecordsThePaddedDimension) {
  State s = apply_all(matmul_relu_dag(), {compute_at(C, D, 0), std::make_shared<StorageAlignStep>(C, 1, 16, 1)});
  ASSERT_EQ(s.stage(C).storage_align.size(), 1u);
  EXPECT_EQ(s.stage(C).storage_align[0].axis, 1);
  EXPECT_EQ(s.stage(C).storage_align[0].factor, 16);
  EXPECT_EQ(s.stage(C).storage_align[0].offset, 1);
  EXPECT_EQ(print_steps(s), "C.compute_at(D, i0)\nC.storage_align(i1, 16, 1)\n");
}

TEST(StateSteps, FollowSplitAndFollowFusedSplitCopyEarlierLengths) {
  State s = apply_all(matmul_relu_dag(), {
                                             split(C, 0, {4, 2}),                                      // step 0
                                             split(C, 3, {8, 2}),                                      // step 1
                                             std::make_shared<FollowSplitStep>(D, 0, 0, 2),            // [4, 2]
                                             std::make_shared<FollowSplitStep>(D, 3, 1, 1),            // [16]
                                             fuse(D, {0, 1}),                                          // 8 * 4
                                             std::make_shared<FollowFusedSplitStep>(D, 0, std::vector<int>{0, 1}, 0, true),
                                         });
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0.0 (0,8)\n"
            "  for i0.1 (0,4)\n"
            "    for i0.2 (0,2)\n"
            "      for i1.0 (0,3)\n"
            "        for i1.1 (0,8)\n"
            "          for i1.2 (0,2)\n"
            "            for r0 (0,32)\n"
            "              C sum= ...\n"
            "for i0.0@i0.1@.0 (0,1)\n"
            "  for i0.0@i0.1@.1 (0,32)\n"
            "    for i0.2 (0,2)\n"
            "      for i1.0 (0,3)\n"
            "        for i1.1 (0,16)\n"
            "          D = ...\n");
  EXPECT_EQ(print_steps(s),
            "C.split(i0, [4, 2])\n"
            "C.split(i1, [8, 2])\n"
            "D.follow_split(i0, step 0, [4, 2])\n"
            "D.follow_split(i1, step 1, [16])\n"
            "D.fuse(i0.0, i0.1)\n"
            "D.follow_fused_split(i0.0@i0.1@, level 0, [32])\n");
}

TEST(StateSteps, CacheWriteInsertsALocalStageBeforeTheStage) {
  State s = apply_all(matmul_relu_dag(), {cache_write(C, "local")});
  ASSERT_EQ(s.stages().size(), 5u);
  EXPECT_EQ(s.stage(2).name(), "C.local");
  EXPECT_EQ(s.stage(2).scope, "local");
  EXPECT_EQ(s.stage(3).name(), "C");
  EXPECT_EQ(s.stage(4).name(), "D");
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    for r0 (0,32)\n"
            "      C.local (local) sum= ...\n"
            "for ax0 (0,64)\n"
            "  for ax1 (0,48)\n"
            "    C = ...\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    D = ...\n");
  EXPECT_EQ(print_steps(s), "C.cache_write(\"local\")\n");
  // The stage copies the cache and its consumer still reads the stage.
  EXPECT_EQ(s.stage(3).op->reducer, te::Reducer::None);
  ASSERT_EQ(s.stage(3).op->inputs().size(), 1u);
  EXPECT_EQ(s.stage(3).op->inputs()[0].get(), s.stage(2).tensor.get());
  EXPECT_EQ(s.stage(4).op->inputs()[0].get(), s.stage(3).tensor.get());
  expect_computes_the_dag(s);
}

// The CPU register tile: cache-write, tile the copy, compute the cache inside one tile.
TEST(StateSteps, CacheWriteThenTileAndComputeTheCacheInsideOneTile) {
  constexpr int Local = 2, Copy = 3;
  State t = apply_all(matmul_relu_dag(), {cache_write(C, "local"), split(Copy, 0, {8}), split(Copy, 2, {16}),
                                          reorder(Copy, {0, 2, 1, 3}), compute_at(Local, Copy, 1)});
  EXPECT_EQ(print_state(t),
            "Placeholder: A, B\n"
            "for ax0.0 (0,8)\n"
            "  for ax1.0 (0,3)\n"
            "    for i0 (0,8)\n"
            "      for i1 (0,16)\n"
            "        for r0 (0,32)\n"
            "          C.local (local) sum= ...\n"
            "    for ax0.1 (0,8)\n"
            "      for ax1.1 (0,16)\n"
            "        C = ...\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    D = ...\n");
  expect_computes_the_dag(t);
}

TEST(StateSteps, CacheWriteKeepsTheStagesComputeLocation) {
  State s = apply_all(matmul_relu_dag(), {compute_at(C, D, 0), cache_write(C, "local")});
  EXPECT_EQ(s.stage(3).compute_at, ComputeAtKind::Iter);
  EXPECT_EQ(s.stage(3).attach_stage, 4);  // D moved from 3 to 4
  EXPECT_EQ(s.stage(2).compute_at, ComputeAtKind::Root);
}

TEST(StateSteps, CacheReadInsertsACopyAfterTheTensorAndRedirectsTheReader) {
  State s = apply_all(matmul_dag(), {cache_read(B, "shared", {C})});
  ASSERT_EQ(s.stages().size(), 4u);
  EXPECT_EQ(s.stage(2).name(), "B.shared");
  EXPECT_EQ(s.stage(3).name(), "C");
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for ax0 (0,32)\n"
            "  for ax1 (0,48)\n"
            "    B.shared (shared) = ...\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    for r0 (0,32)\n"
            "      C sum= ...\n");
  EXPECT_EQ(print_steps(s), "B.cache_read(\"shared\", [C])\n");
  std::vector<te::TensorRef> inputs = s.stage(3).op->inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0]->name, "A");
  EXPECT_EQ(inputs[1].get(), s.stage(2).tensor.get());
  expect_computes_the_dag(s);
  // Computed per row of C, the copy holds one column of B.
  s.apply(compute_at(2, 3, 1));
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    for ax0 (0,32)\n"
            "      for ax1 (0,1)\n"
            "        B.shared (shared) = ...\n"
            "    for r0 (0,32)\n"
            "      C sum= ...\n");
}

TEST(StateSteps, CacheReadOfAComputedStageRenumbersAttachments) {
  State s = apply_all(matmul_relu_dag(), {compute_at(C, D, 0), cache_read(A, "local", {C})});
  EXPECT_EQ(s.stage(1).name(), "A.local");
  EXPECT_EQ(s.stage(3).name(), "C");
  EXPECT_EQ(s.stage(3).attach_stage, 4);
  EXPECT_EQ(s.stage(4).name(), "D");
  // A second cache of the same tensor gets a name of its own.
  s.apply(cache_read(0, "local", {1}));
  EXPECT_EQ(s.stage(1).name(), "A.local.1");
  EXPECT_EQ(s.stage(2).name(), "A.local");
  expect_computes_the_dag(s);

  State r = apply_all(matmul_relu_dag(), {cache_read(C, "local", {D})});
  EXPECT_EQ(r.stage(3).name(), "C.local");
  EXPECT_EQ(r.stage(4).op->inputs()[0].get(), r.stage(3).tensor.get());
  expect_computes_the_dag(r);
}

TEST(StateSteps, RfactorOfTheInnerReductionPart) {
  constexpr int S = 1;
  State s = apply_all(row_reduce_dag(16, 100), {split(S, 1, {8}), rfactor(S, 2, 1)});
  ASSERT_EQ(s.stages().size(), 3u);
  EXPECT_EQ(s.stage(1).name(), "S.rf");
  EXPECT_EQ(s.stage(2).name(), "S");
  EXPECT_EQ(s.stage(1).op->shape, (Shape{16, 8}));
  EXPECT_EQ(print_state(s),
            "Placeholder: A\n"
            "for i0 (0,16)\n"
            "  for r0.1 (0,8)\n"
            "    for r0.0 (0,13)\n"  // 13 * 8 = 104 > 100: guarded
            "      S.rf sum= ...\n"
            "for i0 (0,16)\n"
            "  for r0.1 (0,8)\n"
            "    S sum= ...\n");
  EXPECT_EQ(print_steps(s), "S.split(r0, [8])\nS.rfactor(r0.1, 1)\n");
  expect_computes_the_dag(s);
  // The new spatial axis can now be vectorized, which the reduction loop could not.
  s.apply(annotate(1, 1, IteratorAnnotation::Vectorize));
}

TEST(StateSteps, RfactorOfTheOuterPartAtAxisZero) {
  constexpr int S = 1;
  for (te::Reducer reducer : {te::Reducer::Sum, te::Reducer::Max, te::Reducer::Min}) {
    State s = apply_all(row_reduce_dag(16, 100, reducer), {split(S, 1, {8}), rfactor(S, 1, 0)});
    EXPECT_EQ(s.stage(1).op->shape, (Shape{13, 16}));
    const std::string r = te::reducer_name(reducer);
    EXPECT_EQ(print_state(s),
              "Placeholder: A\n"
              "for r0.0 (0,13)\n"
              "  for i0 (0,16)\n"
              "    for r0.1 (0,8)\n"
              "      S.rf " + r + "= ...\n"
              "for i0 (0,16)\n"
              "  for r0.0 (0,13)\n"
              "    S " + r + "= ...\n");
    expect_computes_the_dag(s);
  }
}

// Past the end of an uneven split the partial stage must add the reducer's identity (here -inf: every
// value is negative, so a 0 would win), and the final stage keeps the reduction's own start value.
TEST(StateSteps, RfactorGuardAddsTheIdentityAndKeepsTheStartValue) {
  auto a = te::placeholder("A", DType::Float32, {4, 30});
  auto m = te::reduce("M", "reduction", DType::Float32, {4}, te::Reducer::Max, {30},
                      [&](const auto& i, const auto& r) { return te::at(a, {i[0], r[0]}) - te::float_imm(5.0); });
  State max_state = apply_all(dag_of({m}), {split(1, 1, {7}), rfactor(1, 2, 1)});
  expect_computes_the_dag(max_state);
  auto s = te::reduce("S", "reduction", DType::Float32, {4}, te::Reducer::Sum, {30},
                      [&](const auto& i, const auto& r) { return te::at(a, {i[0], r[0]}); }, te::float_imm(1.5));
  State sum_state = apply_all(dag_of({s}), {split(1, 1, {7}), rfactor(1, 1, 0)});
  EXPECT_EQ(print_dag_init(sum_state, 1), "float32(0)");
  EXPECT_EQ(print_dag_init(sum_state, 2), "float32(1.5)");
  expect_computes_the_dag(sum_state);
  // A cache-write stage computes the reduction, start value included.
  State cached = apply_all(dag_of({s}), {cache_write(1, "local")});
  EXPECT_EQ(print_dag_init(cached, 1), "float32(1.5)");
  expect_computes_the_dag(cached);
}

TEST(StateSteps, RfactorOfAMatmulAfterReorderingItsReductionParts) {
  State s = apply_all(matmul_dag(), {split(C, 2, {4}), reorder(C, {0, 1, 3, 2}), rfactor(C, 2, 2)});
  EXPECT_EQ(s.stage(2).op->shape, (Shape{64, 48, 4}));
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    for r0.1 (0,4)\n"
            "      for r0.0 (0,8)\n"
            "        C.rf sum= ...\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    for r0.1 (0,4)\n"
            "      C sum= ...\n");
  expect_computes_the_dag(s);
}

// Three reduction axes fused into one loop of 27, split by 4 (7 * 4 = 28, guarded), rfactored.
TEST(StateSteps, RfactorThroughAFusedAndUnevenlySplitReduction) {
  constexpr int O = 3;
  State s = apply_all(conv_dag(), {fuse(O, {4, 5, 6}), split(O, 4, {4}), rfactor(O, 5, 4)});
  EXPECT_EQ(s.stage(3).name(), "O.rf");
  EXPECT_EQ(s.stage(3).op->shape, (Shape{1, 4, 8, 8, 4}));
  ASSERT_EQ(s.stage(3).op->reduce_axes.size(), 1u);
  EXPECT_EQ(s.stage(3).op->reduce_axes[0].extent, 7);
  expect_computes_the_dag(s);
  // The only reduction loop as the factor: the partial stage has nothing left to reduce.
  State whole = apply_all(conv_dag(), {fuse(O, {4, 5, 6}), rfactor(O, 4, 1)});
  EXPECT_EQ(whole.stage(3).op->reducer, te::Reducer::None);
  EXPECT_EQ(whole.stage(3).op->shape, (Shape{1, 27, 4, 8, 8}));
  expect_computes_the_dag(whole);
}

TEST(StateSteps, CopiesAreIndependent) {
  State original = apply_all(matmul_relu_dag(), {split(D, 0, {8})});
  const std::string before = print_state(original);
  State copy = original;
  copy.apply(compute_at(C, D, 1));
  copy.apply(cache_write(C, "local"));
  copy.apply(annotate(4, 0, IteratorAnnotation::Parallel));
  EXPECT_EQ(print_state(original), before);
  EXPECT_EQ(original.steps().size(), 1u);
  EXPECT_EQ(original.stages().size(), 4u);
  EXPECT_NE(print_state(copy), before);
}

}  // namespace
}  // namespace kiln::state
