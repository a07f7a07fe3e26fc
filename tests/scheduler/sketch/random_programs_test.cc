// Every point of the schedule space computes the DAG: random programs (sketch + init-population
// choices) of single ops with awkward shapes, compiled in-process and compared with the evaluator.
// CI checks KILN_SCHEDULE_PROGRAMS (default 20) programs per task; scripts/check-schedules.sh runs the
// recorded count (docs/schedules.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"
#include "toolchain/schedule_check.h"

namespace kiln {
namespace {

int programs_per_task() {
  const char* env = std::getenv("KILN_SCHEDULE_PROGRAMS");
  return env ? std::atoi(env) : 20;
}

void expect_all_correct(ModelBuilder& mb, uint64_t seed = 1, bool optimize = false) {
  testing::TempDir dir;
  mb.save(dir.path("m.onnx"));
  Graph g = load_model(dir.path("m.onnx"), PipelineOptions{});
  ScheduleCheckOptions o;
  o.programs = programs_per_task();
  o.seed = seed;
  o.optimize = optimize;
  int checked = 0;
  for (const TaskScheduleCheck& t : check_model_schedules(g, o, nullptr)) {
    EXPECT_TRUE(t.skipped.empty()) << t.anchor << ": " << t.skipped;
    EXPECT_GE(t.sketches, 1);
    EXPECT_EQ(t.passed, t.programs) << t.anchor << " " << t.key << "\n" << (t.failures.empty() ? "" : t.failures[0]);
    checked += t.programs;
  }
  EXPECT_GT(checked, 0);
  std::cout << "[ programs ] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << ": " << checked
            << " random programs checked\n";
}

ModelBuilder conv(const Shape& x, int64_t out_ch, int64_t k, int64_t stride, int64_t pad, int64_t group, bool relu) {
  ModelBuilder b("conv", 17);
  b.input("x", DType::Float32, x);
  const int64_t h = (x[2] + 2 * pad - k) / stride + 1, w = (x[3] + 2 * pad - k) / stride + 1;
  b.initializer("w", testing::random_weights({out_ch, x[1] / group, k, k}, 1));
  b.initializer("b", testing::random_weights({out_ch}, 2));
  b.node("Conv", {"x", "w", "b"}, {relu ? "c" : "y"})
      .attr("strides", std::vector<int64_t>{stride, stride})
      .attr("pads", std::vector<int64_t>{pad, pad, pad, pad})
      .attr("group", group);
  if (relu) b.node("Relu", {"c"}, {"y"});
  b.output("y", DType::Float32, Shape{x[0], out_ch, h, w});
  return b;
}

TEST(RandomPrograms, MatmulWithPrimeExtents) {
  ModelBuilder b("matmul", 17);
  b.input("a", DType::Float32, Shape{37, 29});
  b.initializer("w", testing::random_weights({29, 41}, 3));
  b.node("MatMul", {"a", "w"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  b.output("y", DType::Float32, Shape{37, 41});
  expect_all_correct(b);
}

// Attention's matmuls: both operands computed at run time, so a third of the sketches pack the
// right-hand one, and the copy may sit inside the reduction loops.
TEST(RandomPrograms, BatchedMatmulOfTwoInputs) {
  ModelBuilder b("attention", 17);
  b.input("q", DType::Float32, Shape{2, 19, 37});
  b.input("k", DType::Float32, Shape{2, 37, 23});
  b.node("MatMul", {"q", "k"}, {"y"});
  b.output("y", DType::Float32, Shape{2, 19, 23});
  expect_all_correct(b);
}

TEST(RandomPrograms, Conv1x1) {
  auto b = conv({1, 16, 9, 9}, 24, 1, 1, 0, 1, true);
  expect_all_correct(b);
}
TEST(RandomPrograms, Conv3x3Padded) {
  auto b = conv({1, 8, 11, 11}, 12, 3, 1, 1, 1, true);
  expect_all_correct(b);
}
TEST(RandomPrograms, ConvStrided) {
  auto b = conv({1, 6, 13, 13}, 10, 3, 2, 0, 1, false);
  expect_all_correct(b);
}
TEST(RandomPrograms, DepthwiseConv) {
  auto b = conv({1, 12, 10, 10}, 12, 3, 1, 1, 12, true);
  expect_all_correct(b);
}
TEST(RandomPrograms, GroupedConv) {
  auto b = conv({1, 8, 7, 7}, 12, 3, 1, 1, 4, false);
  expect_all_correct(b);
}

// Groups of 32 channels fill whole blocks (of 8 or 16), so the layout stage makes this a blocked
// conv whose output blocks read their own group's input blocks (ResNeXt's later stages).
TEST(RandomPrograms, GroupedConvOnBlocks) {
  auto b = conv({1, 64, 9, 9}, 64, 3, 2, 1, 2, true);
  expect_all_correct(b, 1, true);
}

TEST(RandomPrograms, Softmax) {
  ModelBuilder b("softmax", 17);
  b.input("x", DType::Float32, Shape{3, 5, 67});
  b.node("Softmax", {"x"}, {"y"}).attr("axis", int64_t{-1});
  b.output("y", DType::Float32, Shape{3, 5, 67});
  expect_all_correct(b);
}

TEST(RandomPrograms, LayerNorm) {
  ModelBuilder b("layernorm", 17);
  b.input("x", DType::Float32, Shape{6, 48});
  b.initializer("g", testing::random_weights({48}, 4));
  b.initializer("b", testing::random_weights({48}, 5));
  b.node("LayerNormalization", {"x", "g", "b"}, {"y"}).attr("axis", int64_t{-1});
  b.output("y", DType::Float32, Shape{6, 48});
  expect_all_correct(b);
}

TEST(RandomPrograms, ReductionsOverEachAxis) {
  for (int64_t axis = 0; axis < 3; ++axis) {
    ModelBuilder b("reduce", 17);
    b.input("x", DType::Float32, Shape{5, 7, 300});
    Shape out = {5, 7, 300};
    out[static_cast<size_t>(axis)] = 1;
    b.initializer("axes", [&] {
      Tensor t(DType::Int64, {1});
      t.set_int(0, axis);
      return t;
    }());
    b.node("ReduceSum", {"x", "axes"}, {"y"});
    b.output("y", DType::Float32, out);
    expect_all_correct(b, static_cast<uint64_t>(axis) + 1);
  }
}

TEST(RandomPrograms, Pooling) {
  ModelBuilder b("pool", 17);
  b.input("x", DType::Float32, Shape{1, 6, 15, 15});
  b.node("MaxPool", {"x"}, {"m"}).attr("kernel_shape", std::vector<int64_t>{3, 3}).attr("strides", std::vector<int64_t>{2, 2});
  b.node("AveragePool", {"m"}, {"y"}).attr("kernel_shape", std::vector<int64_t>{2, 2}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.output("y", DType::Float32, Shape{1, 6, 8, 8});
  expect_all_correct(b);
}

}  // namespace
}  // namespace kiln
