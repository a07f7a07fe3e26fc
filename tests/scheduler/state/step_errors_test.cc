// Every precondition a step checks: a violation throws ScheduleError whose message names the stage
// (and the loop or field at fault), and the State it was applied to is left exactly as it was.
#include <gtest/gtest.h>

#include "tests/scheduler/lower/lowered_error.h"

#include "scheduler/state/state.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln::state {
namespace {

using namespace testing;  // NOLINT: the DAG builders and step shorthands

constexpr int A = 0, B = 1, C = 2, D = 3;  // matmul_relu_dag's stages

State apply_all(const DagRef& dag, const std::vector<StepRef>& steps) {
  State s(dag);
  for (const StepRef& st : steps) s.apply(st);
  return s;
}

// Applies `step` to `s`, expects a ScheduleError mentioning every fragment, and checks that neither
// State::apply nor the step's own apply_to changed the state. `in_apply_to`: the step itself detects
// the violation (false for what only State::apply's attachment check after the step catches).
void expect_refused(const State& s, const StepRef& step, const std::vector<std::string>& fragments, bool in_apply_to = true) {
  const std::string before = print_state(s), steps_before = print_steps(s);
  const size_t n_stages = s.stages().size(), n_steps = s.steps().size();
  State target = s;
  try {
    target.apply(step);
    ADD_FAILURE() << "no error for " << step->to_json().dump();
  } catch (const ScheduleError& e) {
    for (const std::string& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what() << "\nwanted: " << f;
  }
  EXPECT_EQ(print_state(target), before);
  EXPECT_EQ(print_steps(target), steps_before);
  EXPECT_EQ(target.stages().size(), n_stages);
  EXPECT_EQ(target.steps().size(), n_steps);
  if (!in_apply_to) return;
  // apply_to on a state that owns its data alone must check before it changes anything, too.
  State alone = replay(s.dag_ptr(), s.steps());
  EXPECT_THROW(step->apply_to(alone), ScheduleError);
  EXPECT_EQ(print_state(alone), before);
}

TEST(StepErrors, VectorizeOrParallelizeAReductionLoop) {
  State s(matmul_relu_dag());
  expect_refused(s, annotate(C, 2, IteratorAnnotation::Vectorize), {"'C'", "vectorize", "'r0'"});
  expect_refused(s, annotate(C, 2, IteratorAnnotation::Parallel), {"'C'", "parallel", "'r0'"});
}

TEST(StepErrors, AnnotateALoopTwice) {
  State s = apply_all(matmul_relu_dag(), {annotate(D, 0, IteratorAnnotation::Parallel)});
  expect_refused(s, annotate(D, 0, IteratorAnnotation::Unroll), {"'D'", "'i0'", "already annotated parallel"});
}

TEST(StepErrors, SplitLengthZeroOrNoLengths) {
  State s(matmul_relu_dag());
  expect_refused(s, split(C, 0, {0}), {"split", "'C'", "length 0"});
  expect_refused(s, split(C, 0, {4, -2}), {"'C'", "length -2"});
  expect_refused(s, split(C, 0, {}), {"'C'", "no split lengths"});
  // Lengths whose product wraps int64 (or reaches 2^31) would make a loop of extent 0: refused.
  expect_refused(s, split(C, 0, {int64_t{1} << 32, int64_t{1} << 32}), {"'C'", "multiply past"});
  expect_refused(s, split(C, 0, {1 << 16, 1 << 16}), {"'C'", "multiply past"});
}

TEST(StepErrors, FuseNonAdjacentOrMixedLoops) {
  State s(matmul_relu_dag());
  expect_refused(s, fuse(C, {0, 2}), {"fuse", "'C'", "not adjacent"});
  expect_refused(s, fuse(C, {1, 2}), {"'C'", "'i1'", "'r0'", "differ in kind"});
  expect_refused(s, fuse(C, {}), {"'C'", "no loops"});
}

TEST(StepErrors, ReorderThatIsNotAPermutation) {
  State s(matmul_relu_dag());
  expect_refused(s, reorder(C, {0, 1}), {"reorder", "'C'", "has 3 loops"});
  expect_refused(s, reorder(C, {0, 0, 1}), {"'C'", "appears twice"});
  expect_refused(s, reorder(C, {0, 1, 3}), {"'C'", "no loop 3"});
}

TEST(StepErrors, IteratorOrStageOutOfRange) {
  State s(matmul_relu_dag());
  expect_refused(s, split(C, 7, {4}), {"split", "'C'", "no loop 7"});
  expect_refused(s, annotate(D, -1, IteratorAnnotation::Unroll), {"'D'", "no loop -1"});
  expect_refused(s, split(9, 0, {4}), {"stage 9 does not exist"});
  expect_refused(s, compute_at(C, D, 5), {"compute_at", "'D'", "no loop 5"});
}

TEST(StepErrors, StepsOnPlaceholders) {
  State s(matmul_relu_dag());
  expect_refused(s, split(A, 0, {4}), {"'A'", "is an input"});
  expect_refused(s, compute_at(B, C, 0), {"'B'", "is an input"});
}

// X=0 (placeholder), Y=1 = X + 1, Z=2 = 2 Y, W=3 = Z - 1: a chain where W reads Z, not Y.
DagRef chain_dag() {
  auto x = te::placeholder("X", DType::Float32, {8, 8});
  auto y = te::compute("Y", "elementwise", DType::Float32, {8, 8}, [&](const auto& i) { return te::at(x, i) + te::float_imm(1); });
  auto z = te::compute("Z", "elementwise", DType::Float32, {8, 8}, [&](const auto& i) { return te::at(y, i) * te::float_imm(2); });
  auto w = te::compute("W", "elementwise", DType::Float32, {8, 8}, [&](const auto& i) { return te::at(z, i) - te::float_imm(1); });
  return dag_of({w});
}

TEST(StepErrors, ComputeAtOnANonConsumerOrItself) {
  State s(chain_dag());
  expect_refused(s, compute_at(1, 3, 0), {"compute_at", "'W' is not the only consumer of 'Y'"});
  expect_refused(s, compute_at(1, 1, 0), {"compute_at", "'Y'"});
  expect_refused(s, compute_at(3, 2, 0), {"compute_at", "'W' is an output"});
  State nested = apply_all(chain_dag(), {compute_at(1, 2, 0)});
  expect_refused(nested, compute_at(2, 1, 0), {"compute_at", "'Y' is computed inside 'Z'"});
  // Through an inlined stage the consumer is the one that reads it after inlining.
  State inlined = apply_all(chain_dag(), {compute_inline(2)});
  inlined.apply(compute_at(1, 3, 0));
  EXPECT_EQ(inlined.stage(1).attach_stage, 3);
}

TEST(StepErrors, ComputeAtTheConsumersParentOnlyOutsideTheConsumer) {
  // Z is computed per row of W (loop 0) and per element (loop 1); Y, read by Z, may be computed at
  // W's loops outside Z's or at Z's own, never inside it.
  State per_element = apply_all(chain_dag(), {compute_at(2, 3, 1)});
  per_element.apply(compute_at(1, 3, 0));
  EXPECT_EQ(per_element.stage(1).attach_stage, 3);
  State per_row = apply_all(chain_dag(), {compute_at(2, 3, 0)});
  expect_refused(per_row, compute_at(1, 3, 1), {"compute_at", "'W' is not the only consumer of 'Y', nor computed in it inside that loop"});
  // Y per row of W is one row: what Z's loops read within that iteration.
  EXPECT_EQ(print_state(per_element),
            "Placeholder: X\n"
            "for i0 (0,8)\n"
            "  for i0 (0,1)\n"
            "    for i1 (0,8)\n"
            "      Y = ...\n"
            "  for i1 (0,8)\n"
            "    for i0 (0,1)\n"
            "      for i1 (0,1)\n"
            "        Z = ...\n"
            "    W = ...\n");
  EXPECT_LT(kiln::testing::max_error(per_element), 1e-6);
}

TEST(StepErrors, InlineAReductionAnOutputOrAStageWithAttachments) {
  State s(matmul_relu_dag());
  expect_refused(s, compute_inline(C), {"compute_inline", "'C' is a reduction"});
  expect_refused(s, compute_inline(D), {"compute_inline", "'D' is an output"});
  State attached = apply_all(chain_dag(), {compute_at(1, 2, 0)});
  expect_refused(attached, compute_inline(2), {"compute_inline", "stages are computed inside 'Z'"});
}

TEST(StepErrors, UnknownPragma) {
  State s(matmul_relu_dag());
  expect_refused(s, pragma(C, 0, "unroll_everything"), {"pragma", "'C'", "unknown pragma 'unroll_everything'"});
  expect_refused(s, pragma(C, 0, "auto_unroll_max_step$"), {"'C'", "unknown pragma"});
  expect_refused(s, pragma(C, 0, "auto_unroll_max_step$16x"), {"'C'", "unknown pragma"});
  expect_refused(s, pragma(C, 0, "auto_unroll_max_step$-4"), {"'C'", "unknown pragma"});
}

TEST(StepErrors, StorageAlignOfAReductionLoopOrBadFactor) {
  State s(matmul_relu_dag());
  expect_refused(s, std::make_shared<StorageAlignStep>(C, 2, 16, 1), {"storage_align", "'C'", "'r0' is not an output axis"});
  expect_refused(s, std::make_shared<StorageAlignStep>(C, 1, 16, 16), {"'C'", "factor 16 and offset 16"});
}

TEST(StepErrors, FollowSplitOfAStepThatIsNotASplit) {
  State s = apply_all(matmul_relu_dag(), {split(C, 0, {4, 2}), fuse(C, {0, 1})});
  expect_refused(s, std::make_shared<FollowSplitStep>(D, 0, 1, 1), {"follow_split", "step 1 is not a split"});
  expect_refused(s, std::make_shared<FollowSplitStep>(D, 0, 5, 1), {"follow_split", "step 5 does not exist"});
  expect_refused(s, std::make_shared<FollowSplitStep>(D, 0, 0, 3), {"follow_split", "n_split 3 outside 1..2"});
  expect_refused(s, std::make_shared<FollowFusedSplitStep>(D, 0, std::vector<int>{0}, 2, true), {"level 2"});
}

TEST(StepErrors, CacheWriteAfterASplitOrOfAnInlinedStage) {
  State split_first = apply_all(matmul_relu_dag(), {split(C, 0, {8})});
  expect_refused(split_first, cache_write(C, "local"), {"cache_write", "'C'", "already split"});
  State reordered = apply_all(matmul_relu_dag(), {reorder(C, {1, 0, 2})});
  expect_refused(reordered, cache_write(C, "local"), {"cache_write", "'C'", "reordered"});
  State annotated = apply_all(matmul_relu_dag(), {annotate(C, 0, IteratorAnnotation::Parallel)});
  expect_refused(annotated, cache_write(C, "local"), {"cache_write", "'C'", "'i0' is annotated"});
  State attached = apply_all(matmul_relu_dag(), {compute_at(C, D, 0)});
  expect_refused(attached, cache_write(D, "local"), {"cache_write", "computed inside 'D'"});
  State inlined = apply_all(conv_dag(), {compute_inline(2)});
  expect_refused(inlined, cache_write(2, "local"), {"cache_write", "'P' is inlined"});
  expect_refused(inlined, cache_read(2, "local", {3}), {"cache_read", "'P' is inlined"});
  expect_refused(State(matmul_relu_dag()), cache_write(A, "local"), {"cache_write", "'A' is an input"});
  expect_refused(State(matmul_relu_dag()), cache_write(C, ""), {"cache_write", "'C'", "empty scope"});
}

TEST(StepErrors, CacheReadWithReadersThatDoNotReadIt) {
  State s(matmul_relu_dag());
  expect_refused(s, cache_read(A, "shared", {D}), {"cache_read", "'A' is not read by 'D'"});
  expect_refused(s, cache_read(A, "shared", {}), {"cache_read", "'A'", "no readers"});
  expect_refused(s, cache_read(A, "shared", {C, C}), {"cache_read", "'A'", "'C' is listed twice"});
  expect_refused(s, cache_read(A, "shared", {B}), {"cache_read", "'B' is an input"});
  expect_refused(s, cache_read(7, "shared", {C}), {"cache_read", "stage 7 does not exist"});
  // A stage computed inside its reader may not gain a second reader (the copy) outside it.
  State attached = apply_all(matmul_relu_dag(), {compute_at(C, D, 0)});
  expect_refused(attached, cache_read(C, "local", {D}), {"'C'", "computed inside 'D'", "read elsewhere"}, false);
}

TEST(StepErrors, RfactorOfASpatialLoopOrAfterASpatialSplit) {
  State s = apply_all(row_reduce_dag(16, 100), {split(1, 1, {8})});
  expect_refused(s, rfactor(1, 0, 0), {"rfactor", "'S'", "'i0' is not a reduction loop"});
  expect_refused(s, rfactor(1, 2, 2), {"rfactor", "'S'", "factor axis position 2 outside 0..1"});
  expect_refused(s, rfactor(1, 5, 0), {"rfactor", "'S'", "no loop 5"});
  State spatial = apply_all(row_reduce_dag(16, 100), {split(1, 0, {4}), split(1, 2, {8})});
  expect_refused(spatial, rfactor(1, 3, 0), {"rfactor", "'S'", "spatial loop 'i0' was split"});
  State unchosen = apply_all(row_reduce_dag(16, 100), {split(1, 1, {std::nullopt})});
  expect_refused(unchosen, rfactor(1, 2, 1), {"rfactor", "'S'", "unchosen split length"});
  State annotated = apply_all(row_reduce_dag(16, 100), {split(1, 1, {8}), annotate(1, 0, IteratorAnnotation::Parallel)});
  expect_refused(annotated, rfactor(1, 2, 1), {"rfactor", "'S'", "'i0' is annotated"});
  expect_refused(State(matmul_relu_dag()), rfactor(D, 0, 0), {"rfactor", "'D'", "not a reduction loop"});
}

TEST(StepErrors, RfactorOfAStageWithStagesComputedInsideIt) {
  // A.local (1) is computed inside C (3), which rfactor would rebuild.
  State s = apply_all(matmul_relu_dag(), {cache_read(A, "local", {C}), compute_at(1, 3, 1), split(3, 2, {4})});
  expect_refused(s, rfactor(3, 3, 0), {"rfactor", "stages are computed inside 'C'"});
  // A stage that is itself computed inside its consumer keeps that place.
  State inside = apply_all(matmul_relu_dag(), {compute_at(C, D, 0), split(C, 2, {4}), rfactor(C, 3, 2)});
  EXPECT_EQ(inside.stage(3).name(), "C");
  EXPECT_EQ(inside.stage(3).attach_stage, 4);
}

TEST(StepErrors, ReplayNamesTheFailingStep) {
  try {
    replay(matmul_relu_dag(), {split(C, 0, {8}), fuse(C, {0, 2})});
    ADD_FAILURE() << "no error";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("step 1 (FU)"), std::string::npos) << e.what();
  }
}

TEST(StepErrors, UnknownPrefixWrongFieldCountMalformedFields) {
  auto refused = [](const char* text, const std::string& fragment) {
    try {
      step_from_json(nlohmann::json::parse(text));
      ADD_FAILURE() << "no error for " << text;
    } catch (const ScheduleError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refused(R"(["XX", 1, 2])", "unknown step prefix 'XX'");
  refused(R"(["SP", 2, 0])", "has 3 fields, expected 6");
  refused(R"(["CHW", 2, "local", 1])", "has 4 fields, expected 3");
  refused(R"(["AN", 2, 0, 42])", "unknown annotation 42");
  refused(R"(["AN", 2, "zero", 1])", "malformed step");
  refused(R"(["SP", 2, 0, 64, [4, "x"], 1])", "split length must be an integer or null");
  refused(R"({"SP": 1})", "must be an array");
  refused(R"([])", "must be an array");
  // GT's prefetch field may be left out (older records), not be something else, nor come with no tile.
  refused(R"(["GT", 2, [64], [4], 8, 1, 1])", "has 7 fields, expected 5 to 6");
  refused(R"(["GT", 2, [64]])", "has 3 fields, expected 5 to 6");
  refused(R"(["GT", 2, [64], [4], 8, 2])", "prefetch must be 0 or 1");
}

}  // namespace
}  // namespace kiln::state
