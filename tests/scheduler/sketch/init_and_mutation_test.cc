// Init-population and mutation rules: seeded, valid, and doing what their names say.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "scheduler/sketch/init_rules.h"
#include "scheduler/sketch/mutation_rules.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/step.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/split_step.h"
#include "tests/scheduler/lower/lowered_error.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using namespace state;
using state::testing::matmul_dag;


std::string steps_json(const State& s) {
  nlohmann::json j = nlohmann::json::array();
  for (const StepRef& st : s.steps()) j.push_back(st->to_json());
  return j.dump();
}

TEST(InitRules, SplitLengthsDivideOrPadAndBoundTheInnermost) {
  sketch::Rng rng(5);
  int padded = 0, exact = 0;
  for (int i = 0; i < 400; ++i) {
    const int64_t extent = i % 2 ? 97 : 96;  // a prime and a composite
    std::vector<int64_t> ls = sketch::sample_split_lengths(extent, 3, 64, rng);
    ASSERT_EQ(ls.size(), 3u);
    EXPECT_LE(ls.back(), 64);
    int64_t product = 1;
    for (int64_t l : ls) {
      EXPECT_GE(l, 1);
      product *= l;
    }
    const int64_t outer = (extent + product - 1) / product;
    if (outer * product == extent) ++exact;
    else ++padded;
    EXPECT_LT(outer * product - extent, 16) << "a padded tile wastes less than one block of 16";
  }
  EXPECT_GT(padded, 50) << "prime extents get padded tiles";
  EXPECT_GT(exact, 150);
}

TEST(InitRules, CompletedSketchesAreProgramsAndTheSeedFixesThem) {
  State initial(matmul_dag(64, 32, 48));
  std::vector<State> sketches = sketch::generate_sketches(initial, sketch::SearchParams{});
  std::set<std::string> seen;
  int parallel = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    sketch::Rng a(seed), b(seed);
    State pa = sketch::sample_program(sketches, sketch::SearchParams{}, a);
    State pb = sketch::sample_program(sketches, sketch::SearchParams{}, b);
    EXPECT_EQ(steps_json(pa), steps_json(pb));
    EXPECT_FALSE(pa.has_undefined_lengths());
    const std::string printed = print_steps(pa) + print_state(pa);
    // A program whose outer tile covers the whole matrix has nothing to run in parallel.
    parallel += printed.find("parallel") != std::string::npos;
    EXPECT_NE(printed.find("vectorize"), std::string::npos) << printed;
    EXPECT_NE(printed.find("auto_unroll_max_step"), std::string::npos) << printed;
    seen.insert(steps_json(pa));
  }
  EXPECT_GT(seen.size(), 6u) << "different seeds draw different programs";
  EXPECT_GE(parallel, 6);
}

// The loop a program vectorizes: the name in its "vectorize NAME" line.
std::string vector_loop(const State& s) {
  const std::string nest = print_state(s);
  const size_t at = nest.find("vectorize ");
  if (at == std::string::npos) return "";
  const size_t from = at + 10;
  return nest.substr(from, nest.find(' ', from) - from);
}

TEST(InitRules, TheVectorAxisIsSometimesAnotherLoopOfTheInnermostLevel) {
  // C = A x B, 64 x 48: the innermost tile level holds i0.3 and i1.3, and the tiling leaves i1.3
  // (C's columns) innermost. The vector-axis rule puts i0.3 there in some programs; they compute C.
  State initial(matmul_dag(64, 32, 48));
  const sketch::SearchParams p;
  std::vector<State> sketches = sketch::generate_sketches(initial, p);
  int columns = 0, rows = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    sketch::Rng rng(seed);
    State prog = sketch::sample_program(sketches, p, rng);
    const std::string v = vector_loop(prog);  // "i1.3", or fused loops such as "i0.3@i1.3@"
    const bool has_rows = v.find("i0.3") != std::string::npos, has_columns = v.find("i1.3") != std::string::npos;
    if (has_rows && !has_columns) {
      ++rows;
      EXPECT_LT(kiln::testing::max_error(prog), 1e-3) << print_steps(prog) << print_state(prog);
    }
    columns += has_columns && !has_rows;
  }
  EXPECT_GT(rows, 3);
  EXPECT_GT(columns, rows) << "the loop order stays the likelier vector";
}

// Draws random programs of `dag` (seeds 0, 1, ...) until `want` of them satisfy `chosen` or `tries`
// are drawn; checks each chosen one against the evaluator and returns how many there were.
int check_random_programs_where(const state::testing::DagRef& dag, int want, int tries,
                                const std::function<bool(const State&)>& chosen) {
  const sketch::SearchParams p;
  std::vector<State> sketches = sketch::generate_sketches(State(dag), p);
  int found = 0;
  for (int seed = 0; seed < tries && found < want; ++seed) {
    sketch::Rng rng(static_cast<uint64_t>(seed));
    State prog = sketch::sample_program(sketches, p, rng);
    if (!chosen(prog)) continue;
    ++found;
    EXPECT_LT(kiln::testing::max_error(prog), 1e-3) << print_steps(prog) << print_state(prog);
  }
  return found;
}

TEST(InitRules, APackingCopyIsComputedInsideTheReductionLoopsInSomePrograms) {
  const int in_reduction = check_random_programs_where(matmul_dag(64, 256, 48), 3, 80, [](const State& prog) {
    const int pack = prog.stage_id("B.pack");
    if (pack < 0 || prog.stage(pack).compute_at != ComputeAtKind::Iter) return false;
    const Stage& copy = prog.stage(pack);
    return prog.stage(copy.attach_stage).nodes[static_cast<size_t>(copy.attach_node)].kind != IteratorKind::Spatial;
  });
  EXPECT_EQ(in_reduction, 3) << "a third of the sketches pack; their copies may sit in the reduction loops";
}

TEST(InitRules, APaddedInputIsSometimesComputedInTheStageItsReaderIsComputedIn) {
  // conv_dag: P pads X, O.local (the accumulator) reads P and is computed inside O's tiles. P may
  // be computed at O's outer loops, once for all the tiles inside them (as the default schedule
  // pads a depthwise conv's planes); such programs compute O.
  const int at_parent = check_random_programs_where(state::testing::conv_dag(), 3, 200, [](const State& prog) {
    const int pad = prog.stage_id("P");
    const Stage& st = prog.stage(pad);
    return st.compute_at == ComputeAtKind::Iter && consumers_through_inlined(prog, pad) != std::vector<int>{st.attach_stage};
  });
  EXPECT_EQ(at_parent, 3);
}

TEST(InitRules, ABatchOfOneDoesNotKeepTheOuterLoopsSerial) {
  // C[b, i, j] = sum_k A[b, i, k] B[k, j] with a batch of one: the loop after the batch's has more
  // iterations than the parallel limit (2 cores x 16) in some programs, and is still made parallel.
  auto a = te::placeholder("A", DType::Float32, {1, 16384, 16});
  auto b = te::placeholder("B", DType::Float32, {16, 32});
  auto c = te::reduce("C", "matmul", DType::Float32, {1, 16384, 32}, te::Reducer::Sum, {16},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(a, {i[0], i[1], r[0]}) * te::at(b, {r[0], i[2]});
                      });
  const sketch::SearchParams p;
  std::vector<State> sketches = sketch::generate_sketches(State(state::testing::dag_of({c})), p);
  int parallel = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    sketch::Rng rng(seed);
    parallel += print_state(sketch::sample_program(sketches, p, rng)).find("parallel") != std::string::npos;
  }
  EXPECT_EQ(parallel, 12) << "every program has a parallel loop";
}

TEST(MutationRules, WeightsAreAnsorsCpuWeights) {
  std::map<std::string, double> w;
  for (const auto& r : sketch::cpu_mutation_rules()) w[r->name()] = r->weight();
  EXPECT_DOUBLE_EQ(w["tile-size"], 0.90);
  EXPECT_DOUBLE_EQ(w["auto-unroll"], 0.04);
  EXPECT_DOUBLE_EQ(w["compute-location"], 0.05);
  EXPECT_DOUBLE_EQ(w["parallel"], 0.01);
  EXPECT_DOUBLE_EQ(w["vector-axis"], 0.02);  // kiln's
}

TEST(MutationRules, EachRuleChangesWhatItNamesAndReplays) {
  State initial(matmul_dag(64, 32, 48));
  std::vector<State> sketches = sketch::generate_sketches(initial, sketch::SearchParams{});
  sketch::Rng rng(11);
  std::map<std::string, int> changed;
  for (int round = 0; round < 40; ++round) {
    State p = sketch::sample_program(sketches, sketch::SearchParams{}, rng);
    for (const auto& rule : sketch::cpu_mutation_rules()) {
      std::optional<State> m = rule->apply(p, sketch::SearchParams{}, rng);
      if (!m) continue;
      ASSERT_NE(steps_json(*m), steps_json(p)) << rule->name();
      // The mutated state replays from its own record.
      State again = replay(m->dag_ptr(), m->steps());
      EXPECT_EQ(print_state(again), print_state(*m));
      ++changed[rule->name()];
    }
  }
  EXPECT_GT(changed["tile-size"], 30);
  EXPECT_GT(changed["auto-unroll"], 10);
  EXPECT_GT(changed["compute-location"], 5);
  EXPECT_GT(changed["parallel"], 0);
  EXPECT_GT(changed["vector-axis"], 5);
}

TEST(MutationRules, TileSizeMutationKeepsTheInnermostBound) {
  State initial(matmul_dag(128, 128, 128));
  std::vector<State> sketches = sketch::generate_sketches(initial, sketch::SearchParams{});
  sketch::Rng rng(3);
  State p = sketch::sample_program(sketches, sketch::SearchParams{}, rng);
  for (int i = 0; i < 100; ++i) {
    std::optional<State> m = sketch::cpu_mutation_rules()[0]->apply(p, sketch::SearchParams{}, rng);
    if (!m) continue;
    for (const StepRef& st : m->steps())
      if (auto* sp = dynamic_cast<const SplitStep*>(st.get())) {
        EXPECT_LE(sp->lengths.back().value_or(1), 64);
      }
    p = *m;
  }
}

}  // namespace
}  // namespace kiln
