// Long Loops and Scans as StepLoops (frontend/passes/roll_loops.h): the body becomes a closed graph
// (iteration number, carried values, outer reads as invariants), the compiled package runs it in a
// loop and computes what the reference does; short loops and loops whose carried values change shape
// stay unrolled.
#include "frontend/passes/roll_loops.h"

#include <gtest/gtest.h>

#include "frontend/ir/step_loop.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

int count_step_loops(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) {
    EXPECT_FALSE(is_control_flow(node)) << node.label();
    n += is_step_loop(node);
  }
  return n;
}

// Loop body: x = x / 2 + i + bias (bias read from outside), each iteration's x a scan output.
ModelBuilder halving_loop(int64_t trips) {
  ModelBuilder body("body");
  body.input("i", DType::Int64, Shape{});
  body.input("cond_in", DType::Bool, Shape{});
  body.input("x_in", DType::Float32, Shape{2, 2});
  body.initializer("half", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{0.5}));
  body.node("Cast", {"i"}, {"fi"}).attr("to", int64_t{1});
  body.node("Mul", {"x_in", "half"}, {"halved"});
  body.node("Add", {"halved", "fi"}, {"shifted"});
  body.node("Add", {"shifted", "bias"}, {"x_out"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.node("Identity", {"x_out"}, {"row"});
  body.output("cond_out", DType::Bool, Shape{});
  body.output("x_out", DType::Float32, Shape{2, 2});
  body.output("row", DType::Float32, Shape{2, 2});
  ModelBuilder b("loop");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("bias", DType::Float32, Shape{2, 2});
  b.initializer("M", Tensor::scalar_int(DType::Int64, trips));
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"final", "rows"}, "loop").attr("body", body);
  b.output("final", DType::Float32, Shape{2, 2});
  b.output("rows", DType::Float32, Shape{trips, 2, 2});
  return b;
}

TEST(RollLoops, ALongLoopRunsAsAStepLoop) {
  const int64_t trips = 5000;  // more than unrolling would take
  ModelBuilder b = halving_loop(trips);
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  EXPECT_EQ(count_step_loops(pkg.graph()), 1);
  const std::map<std::string, Tensor> in = {
      {"x", Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{1, 2, 3, 4})},
      {"bias", Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{0.25, -1, 0, 8})}};
  const std::vector<Tensor> want = run_reference(pkg.graph(), in);
  std::vector<double> x = {1, 2, 3, 4};
  const std::vector<double> bias = {0.25, -1, 0, 8};
  for (int64_t i = 0; i < trips; ++i)
    for (size_t e = 0; e < 4; ++e) {
      x[e] = static_cast<double>(static_cast<float>(x[e] * 0.5 + static_cast<double>(i)));
      x[e] = static_cast<double>(static_cast<float>(x[e] + bias[e]));
      EXPECT_EQ(want[1].get_double(i * 4 + static_cast<int64_t>(e)), x[e]) << "iteration " << i;
    }
  testing::expect_same_outputs(want, pkg.run(in));
}

TEST(RollLoops, ALongScanReadsAndStacksInTheDirectionsAndAxesItNames) {
  const int64_t length = 40;
  ModelBuilder body("body");
  body.input("sum_in", DType::Float32, Shape{2});
  body.input("row", DType::Float32, Shape{2});
  body.node("Add", {"sum_in", "row"}, {"sum_out"});
  body.node("Identity", {"sum_out"}, {"step"});
  body.output("sum_out", DType::Float32, Shape{2});
  body.output("step", DType::Float32, Shape{2});
  ModelBuilder b("scan");
  b.input("init", DType::Float32, Shape{2});
  b.input("x", DType::Float32, Shape{2, length});
  b.node("Scan", {"init", "x"}, {"total", "steps"}, "scan")
      .attr("body", body)
      .attr("num_scan_inputs", int64_t{1})
      .attr("scan_input_axes", std::vector<int64_t>{1})
      .attr("scan_input_directions", std::vector<int64_t>{1})
      .attr("scan_output_axes", std::vector<int64_t>{-1})
      .attr("scan_output_directions", std::vector<int64_t>{1});
  b.output("total", DType::Float32, Shape{2});
  b.output("steps", DType::Float32, Shape{2, length});
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  EXPECT_EQ(count_step_loops(pkg.graph()), 1);
  std::vector<double> xs;
  for (int64_t i = 0; i < 2 * length; ++i) xs.push_back(static_cast<double>(i % 7));
  const std::map<std::string, Tensor> in = {{"init", Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{10, 20})},
                                            {"x", Tensor::from_doubles(DType::Float32, {2, length}, xs)}};
  const std::vector<Tensor> want = run_reference(pkg.graph(), in);
  // Columns read last first; the sums stacked along the last axis, last iteration first.
  for (int64_t r = 0; r < 2; ++r) {
    double sum = r == 0 ? 10 : 20;
    for (int64_t t = 0; t < length; ++t) {
      sum += xs[static_cast<size_t>(r * length + (length - 1 - t))];
      EXPECT_EQ(want[1].get_double(r * length + (length - 1 - t)), sum) << "row " << r << " iteration " << t;
    }
    EXPECT_EQ(want[0].get_double(r), sum);
  }
  testing::expect_same_outputs(want, pkg.run(in));
}

TEST(RollLoops, ShortLoopsAndLoopsWhoseStateChangesShapeStayUnrolled) {
  ModelBuilder short_loop = halving_loop(kMinRolledIterations - 1);
  EXPECT_EQ(count_step_loops(testing::prepared_graph(short_loop)), 0);

  ModelBuilder body("body");
  body.input("i", DType::Int64, Shape{});
  body.input("cond_in", DType::Bool, Shape{});
  body.input("acc_in", DType::Float32, Shape{});
  body.node("Concat", {"acc_in", "x"}, {"acc_out"}).attr("axis", int64_t{0});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out", DType::Bool, Shape{});
  body.output("acc_out", DType::Float32, Shape{});
  ModelBuilder growing("growing");
  growing.input("x", DType::Float32, Shape{1});
  growing.initializer("M", Tensor::scalar_int(DType::Int64, 40));
  growing.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  growing.node("Loop", {"M", "go", "x"}, {"acc"}, "loop").attr("body", body);
  growing.output("acc", DType::Float32, Shape{41});
  const Graph g = testing::prepared_graph(growing);
  EXPECT_EQ(count_step_loops(g), 0);
  EXPECT_EQ(g.value("acc").shape, (Shape{41}));
}

}  // namespace
}  // namespace kiln
