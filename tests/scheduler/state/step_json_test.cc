// Records: every step survives to_json -> text -> parse -> step_from_json unchanged, the arrays have
// the documented shape (docs/records.md), and a whole schedule's step list, written out and read back,
// replays to the same state.
#include <gtest/gtest.h>

#include <set>

#include "scheduler/state/state.h"
#include "scheduler/state/steps/gpu_tile_step.h"
#include "scheduler/state/steps/layout_rewrite_step.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln::state {
namespace {

using namespace testing;  // NOLINT: the DAG builders and step shorthands

StepRef round_trip(const StepRef& step) { return step_from_json(nlohmann::json::parse(step->to_json().dump())); }

// One of each of the 16 steps (Ansor's 14, kiln's layout rewrite and GPU tile), with the record text docs/records.md describes for it.
std::vector<std::pair<StepRef, std::string>> one_of_each() {
  return {
      {annotate(2, 1, IteratorAnnotation::Vectorize), R"(["AN",2,1,2])"},
      {annotate(3, 0, IteratorAnnotation::ThreadY), R"(["AN",3,0,8])"},
      {fuse(2, {0, 1, 2}), R"(["FU",2,[0,1,2]])"},
      {pragma(2, 0, "auto_unroll_max_step$64"), R"(["PR",2,0,"auto_unroll_max_step$64"])"},
      {reorder(2, {1, 0, 2}), R"(["RE",2,[1,0,2]])"},
      {std::make_shared<SplitStep>(2, 0, 64, std::vector<std::optional<int64_t>>{8, 2}, true), R"(["SP",2,0,64,[8,2],1])"},
      {std::make_shared<SplitStep>(2, 1, 48, std::vector<std::optional<int64_t>>{std::nullopt, 4}, false),
       R"(["SP",2,1,48,[null,4],0])"},
      {std::make_shared<FollowSplitStep>(3, 0, 1, 2), R"(["FSP",3,0,1,2])"},
      {std::make_shared<FollowFusedSplitStep>(3, 0, std::vector<int>{1, 4}, 0, true), R"(["FFSP",3,0,[1,4],0,1])"},
      {std::make_shared<StorageAlignStep>(2, 1, 16, 1), R"(["SA",2,1,16,1])"},
      {compute_at(2, 3, 1), R"(["CA",2,3,1])"},
      {compute_inline(1), R"(["CI",1])"},
      {compute_root(1), R"(["CR",1])"},
      {cache_read(1, "shared", {2, 4}), R"(["CHR",1,"shared",[2,4]])"},
      {cache_write(2, "local"), R"(["CHW",2,"local"])"},
      {rfactor(1, 2, 1), R"(["RF",1,2,1])"},
      {std::make_shared<LayoutRewriteStep>(1), R"(["LR",1])"},
      {std::make_shared<GpuTileStep>(2, std::vector<int64_t>{64, 128}, std::vector<int64_t>{4, 8}, 16),
       R"(["GT",2,[64,128],[4,8],16])"},
      {std::make_shared<GpuTileStep>(2, std::vector<int64_t>{}, std::vector<int64_t>{}, 0), R"(["GT",2,[],[],0])"},
      {std::make_shared<GpuTileStep>(2, std::vector<int64_t>{64, 128}, std::vector<int64_t>{4, 8}, 16, true),
       R"(["GT",2,[64,128],[4,8],16,1])"},
  };
}

TEST(StepJson, EveryStepRoundTripsThroughText) {
  std::set<std::string> prefixes;
  for (const auto& [step, text] : one_of_each()) {
    EXPECT_EQ(step->to_json().dump(), text);
    StepRef back = round_trip(step);
    EXPECT_EQ(back->to_json(), step->to_json()) << text;
    EXPECT_STREQ(back->prefix(), step->prefix());
    EXPECT_EQ(back->stage_id, step->stage_id);
    prefixes.insert(step->prefix());
  }
  EXPECT_EQ(prefixes.size(), 16u);
}

// A schedule that uses all 14 steps on relu(matmul) and a row sum, written as one JSON array the way a
// record holds it, read back and replayed.
void expect_replays_the_same(const State& s) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRef& st : s.steps()) steps.push_back(st->to_json());
  const std::string text = steps.dump();
  std::vector<StepRef> read;
  for (const nlohmann::json& j : nlohmann::json::parse(text)) read.push_back(step_from_json(j));
  State again = replay(s.dag_ptr(), read);
  EXPECT_EQ(print_state(again), print_state(s)) << text;
  EXPECT_EQ(print_steps(again), print_steps(s)) << text;
  // And the second serialization is the first.
  nlohmann::json steps_again = nlohmann::json::array();
  for (const StepRef& st : again.steps()) steps_again.push_back(st->to_json());
  EXPECT_EQ(steps_again.dump(), text);
}

TEST(StepJson, AWholeScheduleReplaysFromItsRecord) {
  // relu(matmul): A=0 B=1 C=2 D=3; after the cache steps A=0 A.local=1 B=2 C.local=3 C=4 D=5.
  State s(matmul_relu_dag());
  for (const StepRef& st : std::vector<StepRef>{
           cache_write(2, "local"),                                          // 0: C.local=2, C=3, D=4
           cache_read(0, "local", {2}),                                      // 1: A.local=1, C.local=3, C=4, D=5
           split(5, 0, {4, 2}),                                              // 2
           split(5, 3, {8, 2}),                                              // 3
           reorder(5, {0, 3, 1, 4, 2, 5}),                                   // 4
           compute_inline(4),                                                // 5: C becomes D's load
           std::make_shared<FollowSplitStep>(3, 0, 2, 2),                    // 6
           std::make_shared<FollowSplitStep>(3, 3, 3, 2),                    // 7
           compute_at(3, 5, 3),                                              // 8: the tile inside D's i1.1
           compute_at(1, 3, 5),                                              // 9
           std::make_shared<StorageAlignStep>(1, 1, 16, 1),                  // 10
           fuse(5, {0, 1}),                                                  // 11
           annotate(5, 0, IteratorAnnotation::Parallel),                     // 12
           pragma(5, 0, "auto_unroll_max_step$16"),                          // 13
           annotate(5, 4, IteratorAnnotation::Vectorize),                    // 14
           std::make_shared<FollowFusedSplitStep>(2, 0, std::vector<int>{2, 3}, 0, true),  // 15: B (a placeholder) refuses
       }) {
    if (st->prefix() == std::string("FFSP")) {
      EXPECT_THROW(s.apply(st), ScheduleError);
      continue;
    }
    s.apply(st);
  }
  expect_replays_the_same(s);
  expect_computes_the_dag(s);

  State r(row_reduce_dag(16, 100));
  r.apply(split(1, 1, {std::nullopt}));
  EXPECT_TRUE(r.has_undefined_lengths());
  expect_replays_the_same(r);
  State filled(row_reduce_dag(16, 100));
  for (const StepRef& st : std::vector<StepRef>{split(1, 1, {16}), rfactor(1, 2, 1), annotate(1, 1, IteratorAnnotation::Vectorize),
                                                split(2, 0, {4}), std::make_shared<FollowFusedSplitStep>(1, 0, std::vector<int>{3}, 0, true),
                                                annotate(2, 0, IteratorAnnotation::Parallel), compute_at(1, 2, 0)})
    filled.apply(st);
  expect_replays_the_same(filled);
  expect_computes_the_dag(filled);
}

// The example line in docs/records.md: its steps replay on relu(matmul) (C=2, D=3) and print as the
// register-tiled matmul the page describes.
TEST(StepJson, TheExampleRecordInTheDocsReplays) {
  const char* line =
      R"({"i": [["9c1f0e5a7d3b2c48", "x86_64-avx2", [8, 32, 64, 0, 0, 0, 0, 0]],)"
      R"( [[], [["CHW", 2, "local"], ["SP", 3, 0, 64, [8], 1], ["SP", 3, 2, 48, [16], 1],)"
      R"( ["RE", 3, [0, 2, 1, 3]], ["CA", 2, 3, 1], ["FU", 3, [0, 1]], ["AN", 3, 0, 3],)"
      R"( ["AN", 3, 2, 2], ["PR", 3, 0, "auto_unroll_max_step$16"]]]],)"
      R"( "r": [[0.000412, 0.000409, 0.000415], 0, 1.83, 1718000000], "v": "v0.6"})";
  nlohmann::json record = nlohmann::json::parse(line);
  std::vector<StepRef> steps;
  for (const nlohmann::json& j : record.at("i").at(1).at(1)) steps.push_back(step_from_json(j));
  State s = replay(matmul_relu_dag(), steps);
  EXPECT_EQ(print_state(s),
            "Placeholder: A, B\n"
            "parallel ax0.0@ax1.0@ (0,24) [auto_unroll_max_step=16]\n"
            "  for i0 (0,8)\n"
            "    for i1 (0,16)\n"
            "      for r0 (0,32)\n"
            "        C.local (local) sum= ...\n"
            "  for ax0.1 (0,8)\n"
            "    vectorize ax1.1 (0,16)\n"
            "      C = ...\n"
            "for i0 (0,64)\n"
            "  for i1 (0,48)\n"
            "    D = ...\n");
  EXPECT_EQ(record.at("v"), "v0.6");
}

}  // namespace
}  // namespace kiln::state
