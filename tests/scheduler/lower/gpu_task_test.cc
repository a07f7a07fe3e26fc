// A task's GPU program from its gpu_tile steps (scheduler/lower/gpu_task.h, scheduler/search/
// gpu_tile_search.h): programs drawn from the space and mutated compute what the evaluator computes
// when their threads run one after another on the CPU (JIT), a record's steps replay to the same
// tiles, and tiles outside the space or programs that are not GPU programs are refused by name.
#include <gtest/gtest.h>

#include <random>

#include "scheduler/lower/gpu_shared_tiles.h"
#include "scheduler/lower/gpu_task.h"
#include "scheduler/search/gpu_tile_search.h"
#include "scheduler/state/steps/gpu_tile_step.h"
#include "scheduler/state/steps/split_step.h"
#include "tests/scheduler/lower/lowered_error.h"

namespace kiln {
namespace {

using te::Expr;
using te::int_imm;

te::TensorRef matmul(int64_t m, int64_t n, int64_t k) {
  te::TensorRef a = te::placeholder("a", DType::Float32, {m, k});
  te::TensorRef b = te::placeholder("b", DType::Float32, {k, n});
  return te::reduce("mm", "matmul", DType::Float32, {m, n}, te::Reducer::Sum, {k},
                    [&](const std::vector<Expr>& o, const std::vector<Expr>& r) { return te::at(a, {o[0], r[0]}) * te::at(b, {r[0], o[1]}); });
}

// relu(conv + bias): the relu and bias become the conv's epilogue.
te::TensorRef conv_relu(int64_t c, int64_t m, int64_t hw) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, c, hw, hw});
  te::TensorRef w = te::placeholder("w", DType::Float32, {m, c, 3, 3});
  te::TensorRef bias = te::placeholder("bias", DType::Float32, {m});
  te::TensorRef conv = te::reduce("conv", "conv", DType::Float32, {1, m, hw, hw}, te::Reducer::Sum, {c, 3, 3},
                                  [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                    Expr y = o[2] + r[1] - int_imm(1), xx = o[3] + r[2] - int_imm(1);
                                    Expr inside = y >= int_imm(0) && y < int_imm(hw) && xx >= int_imm(0) && xx < int_imm(hw);
                                    return te::select(inside, te::at(x, {o[0], r[0], y, xx}), te::const_of(DType::Float32, 0)) *
                                           te::at(w, {o[1], r[0], r[1], r[2]});
                                  });
  return te::compute("relu", "elementwise", DType::Float32, {1, m, hw, hw}, [&](const std::vector<Expr>& i) {
    return te::binary(te::ExprOp::Max, te::at(conv, i) + te::at(bias, {i[1]}), te::const_of(DType::Float32, 0));
  });
}

std::shared_ptr<const te::ComputeDAG> dag_of(const te::TensorRef& out) {
  return std::make_shared<const te::ComputeDAG>(te::make_dag({out}));
}

TEST(GpuTask, DrawnAndMutatedProgramsComputeWhatTheEvaluatorComputes) {
  const lower::GpuScheduleParams p;
  std::mt19937_64 rng(7);
  int tiled = 0;
  for (const te::TensorRef& out : {matmul(64, 96, 80), conv_relu(16, 32, 12)}) {
    const auto dag = dag_of(out);
    const std::vector<search::GpuStageSpace> space = search::gpu_task_space(*dag, p);
    ASSERT_EQ(space.size(), 1u) << out->name;
    EXPECT_GT(space[0].tiles.size(), 20u);
    search::GpuChoice choice = search::random_gpu_choice(space, rng);
    for (int draw = 0; draw < 10; ++draw) {
      choice = draw % 2 ? search::mutate_gpu_choice(space, choice, rng) : search::random_gpu_choice(space, rng);
      const state::State program = search::gpu_program(dag, space, choice);
      tiled += choice[0] >= 0;
      const lower::LoweredFunc f = lower::lower_gpu_task(program, "k", p);
      EXPECT_LT(testing::max_error(f, *dag), 1e-4) << state::print_steps(program) << lower::print_func(f);
      // What a record keeps replays to the same tiles.
      std::vector<state::StepRef> read;
      for (const state::StepRef& s : program.steps()) read.push_back(state::step_from_json(nlohmann::json::parse(s->to_json().dump())));
      EXPECT_EQ(lower::gpu_stage_tiles(state::replay(dag, read), p), lower::gpu_stage_tiles(program, p));
    }
  }
  EXPECT_GE(tiled, 12);  // "none" is one choice among many
}

TEST(GpuTask, ATuningMutationChangesOneKnobOfOneStage) {
  const auto dag = dag_of(matmul(128, 128, 64));
  const std::vector<search::GpuStageSpace> space = search::gpu_task_space(*dag, {});
  std::mt19937_64 rng(3);
  const search::GpuChoice from{static_cast<int>(space[0].tiles.size() / 2)};
  for (int i = 0; i < 20; ++i) {
    const search::GpuChoice to = search::mutate_gpu_choice(space, from, rng);
    ASSERT_GE(to[0], 0);
    const lower::GpuSharedTile &a = space[0].tiles[static_cast<size_t>(from[0])], &b = space[0].tiles[static_cast<size_t>(to[0])];
    EXPECT_EQ((a.block == b.block) + (a.thread_tile == b.thread_tile) + (a.k_chunk == b.k_chunk) + (a.prefetch == b.prefetch), 3);
  }
}

TEST(GpuTask, ATileOutsideTheTargetsSpaceIsRefusedNamingTheStage) {
  const auto dag = dag_of(matmul(256, 256, 64));
  state::State s(dag);
  // Divides every axis (the step accepts it) but asks for 256 x 256 threads, over a block's 1024.
  s.apply(std::make_shared<state::GpuTileStep>(2, std::vector<int64_t>{256, 256}, std::vector<int64_t>{1, 1}, 8));
  try {
    lower::gpu_stage_tiles(s, {});
    FAIL() << "a tile of 65536 threads was accepted";
  } catch (const state::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("'mm'"), std::string::npos) << e.what();
  }
}

TEST(GpuTask, TheStepRefusesTilesThatDoNotDivideAndStagesThatDoNotReduce) {
  const te::TensorRef out = conv_relu(8, 16, 6);
  const auto dag = dag_of(out);
  state::State s(dag);
  const int conv = 3, relu = 4;  // x, w, bias, then the stages
  EXPECT_THROW(s.apply(std::make_shared<state::GpuTileStep>(relu, std::vector<int64_t>{}, std::vector<int64_t>{}, 0)),
               state::ScheduleError);
  EXPECT_THROW(s.apply(std::make_shared<state::GpuTileStep>(conv, std::vector<int64_t>{1, 16, 4, 6},
                                                            std::vector<int64_t>{1, 1, 1, 1}, 2)),
               state::ScheduleError);  // 4 does not divide 6
  EXPECT_THROW(s.apply(std::make_shared<state::GpuTileStep>(conv, std::vector<int64_t>{1, 16, 6, 6},
                                                            std::vector<int64_t>{1, 1, 1, 1}, 3)),
               state::ScheduleError);  // 3 does not divide 8 channels
  EXPECT_NO_THROW(s.apply(std::make_shared<state::GpuTileStep>(conv, std::vector<int64_t>{1, 16, 6, 6},
                                                               std::vector<int64_t>{1, 4, 1, 2}, 4)));
}

TEST(GpuTask, ACpuProgramIsNotAGpuProgram) {
  const auto dag = dag_of(matmul(64, 64, 64));
  state::State s(dag);
  s.apply(std::make_shared<state::SplitStep>(2, 0, 64, std::vector<std::optional<int64_t>>{8}, true));
  EXPECT_THROW(lower::gpu_stage_tiles(s, {}), state::ScheduleError);
}

}  // namespace
}  // namespace kiln
