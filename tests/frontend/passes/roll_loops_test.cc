// Long Loops and Scans as StepLoops (frontend/passes/roll_loops.h): the body becomes a closed graph
// (iteration number, carried values, outer reads as invariants), the compiled package runs it in a
// loop and computes what the reference does; short loops and loops whose carried values change shape
// stay unrolled.
#include "frontend/passes/roll_loops.h"

#include <gtest/gtest.h>

#include <tuple>

#include "frontend/ir/step_loop.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/te/lower_graph.h"
#include "scheduler/te/te_eval.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

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

// A Loop of x = x / 2 + i + bias (bias read from outside), each iteration's x a scan output.
ModelBuilder halving_loop(int64_t trips) {
  ModelBuilder b("loop");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("bias", DType::Float32, Shape{2, 2});
  b.initializer("M", Tensor::scalar_int(DType::Int64, trips));
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"final", "rows"}, "loop")
      .attr("body", testing::scale_loop_body({.scale = 0.5, .scan = true, .bias = true}));
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
  ModelBuilder body = testing::running_sum_body();
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

// x after the iterations that run: at most `trips`, and none after the one whose sum reaches `limit`.
std::vector<double> halving_result(int64_t trips, double limit) {
  std::vector<double> x = {1, 2, 3, 4};
  for (int64_t i = 0; i < trips; ++i) {
    double total = 0;
    for (double& v : x) total += v = static_cast<double>(static_cast<float>(v * 0.5 + static_cast<double>(i)));
    if (!(total < limit)) break;
  }
  return x;
}

// A trip count decided at run time, bounded by --max-trip-count, and a condition decided at run time:
// the loop is a StepLoop whose iterations run while k < M and the condition holds, in the reference,
// in the package, and unrolled (the te engine).
TEST(RollLoops, ALoopDecidedAtRunTimeStopsWhereTheReferenceDoes) {
  ModelBuilder b("run_time_loop");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("M", DType::Int64, Shape{});
  b.input("limit", DType::Float32, Shape{});
  b.input("go", DType::Bool, Shape{});
  b.node("Loop", {"M", "go", "x"}, {"final"}, "loop").attr("body", testing::scale_loop_body({.scale = 0.5, .until_limit = true}));
  b.output("final", DType::Float32, Shape{2, 2});
  testing::TempDir dir;
  b.save(dir.path("loop.onnx"));
  PipelineOptions po;
  const int64_t bound = 50;
  po.bindings.max_trip_counts["loop"] = bound;
  const Graph g = load_model(dir.path("loop.onnx"), po);
  EXPECT_EQ(count_step_loops(g), 1);
  ASSERT_EQ(g.limits.size(), 1u);
  const testing::HostPackage pkg(g, dir);
  te::LoweredGraph lg = te::lower_graph(g);
  const Tensor x = Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{1, 2, 3, 4});
  for (const auto& [m, limit, go] : std::vector<std::tuple<int64_t, double, bool>>{
           {0, 1e9, true}, {7, 1e9, true}, {bound, 1e9, true}, {bound + 30, 1e9, true}, {bound, 100, true}, {bound, 1e9, false}}) {
    SCOPED_TRACE("M = " + std::to_string(m) + ", limit " + std::to_string(limit) + (go ? "" : ", not started"));
    const std::map<std::string, Tensor> in = {{"x", x},
                                              {"M", Tensor::scalar_int(DType::Int64, m)},
                                              {"limit", Tensor::scalar_double(DType::Float32, limit)},
                                              {"go", Tensor::scalar_int(DType::Bool, go)}};
    const std::vector<Tensor> want = run_reference(g, in);
    EXPECT_EQ(want[0].to_doubles(), go ? halving_result(std::min(m, bound), limit) : x.to_doubles());
    testing::expect_same_outputs(want, pkg.run(in));
    std::map<const te::TensorNode*, Tensor> bound_inputs;
    for (const auto& [name, t] : lg.inputs) bound_inputs[t.get()] = in.at(name);
    testing::expect_same_outputs(want, te::evaluate(lg.dag, bound_inputs));
  }
}

// A loop whose inputs are all known runs at compile time (its result a constant) only while its
// work stays within what unrolling allowed; a billion iterations stay for run time instead of
// hanging the compiler.
TEST(RollLoops, ALoopOfKnownInputsFoldsOnlyWhenItsWorkIsBounded) {
  auto known_loop = [](int64_t trips) {
    ModelBuilder b("known");
    b.initializer("x", Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{1, 2, 3, 4}));
    b.initializer("M", Tensor::scalar_int(DType::Int64, trips));
    b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
    b.node("Loop", {"M", "go", "x"}, {"final"}, "loop").attr("body", testing::scale_loop_body({.scale = 0.5}));
    b.output("final", DType::Float32, Shape{2, 2});
    return b;
  };
  ModelBuilder small = known_loop(40);
  const Graph folded = testing::prepared_graph(small);
  ASSERT_TRUE(folded.value("final").constant);
  EXPECT_EQ(count_step_loops(folded), 0);
  ModelBuilder huge = known_loop(int64_t{1} << 30);
  const Graph kept = testing::prepared_graph(huge);
  EXPECT_FALSE(kept.value("final").constant);
  EXPECT_EQ(count_step_loops(kept), 1);
}

TEST(RollLoops, ShortLoopsAndLoopsWhoseStateChangesShapeStayUnrolled) {
  ModelBuilder short_loop = halving_loop(kMinRolledIterations - 1);
  EXPECT_EQ(count_step_loops(testing::prepared_graph(short_loop)), 0);

  ModelBuilder growing = testing::growing_loop(40, 0);
  const Graph g = testing::prepared_graph(growing);
  EXPECT_EQ(count_step_loops(g), 0);
  EXPECT_EQ(g.value("acc").shape, (Shape{41}));
}

}  // namespace
}  // namespace kiln
