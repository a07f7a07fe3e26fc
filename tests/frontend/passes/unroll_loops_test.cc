// Short Loops and Scans unrolled into their iterations (frontend/passes/unroll_loops.h; long ones become
// StepLoops, roll_loops_test.cc): a static trip count,
// a condition decided at run time (guarded iterations), scan outputs stacked in order, Scan's
// directions and axes; the compiled package computes what the reference does; loops kiln cannot
// bound are refused naming the node.
#include "frontend/passes/unroll_loops.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"
#include "toolchain/compile_target.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_package.h"

namespace kiln {
namespace {

// Body of a loop that doubles x [2, 2] and adds the iteration number; its condition output is
// ReduceSum(x) < limit (an outer value) when `limit` is given, else the condition it was given.
ModelBuilder doubling_body(bool until_limit, bool scan) {
  return testing::scale_loop_body({.scale = 2, .until_limit = until_limit, .scan = scan});
}

// What the loop computes for x = [1, 2, 3, 4]: per iteration x = 2x + i, stopping before an
// iteration once the condition fails (a `limit` of -1: never) or after `trips`.
std::vector<std::vector<double>> expected_iterations(int trips, double limit) {
  std::vector<double> x = {1, 2, 3, 4};
  std::vector<std::vector<double>> seen;
  for (int i = 0; i < trips; ++i) {
    double total = 0;
    for (double& v : x) total += v = 2 * v + i;
    seen.push_back(x);
    if (limit >= 0 && !(total < limit)) break;
  }
  return seen;
}

const Tensor kX = Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{1, 2, 3, 4});

// The reference's and the compiled package's outputs for `inputs` must agree; returns the former.
std::vector<Tensor> run_both(ModelBuilder& b, const std::vector<std::map<std::string, Tensor>>& runs,
                             std::vector<std::vector<Tensor>>& reference) {
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  for (const Node& n : pkg.graph().nodes) EXPECT_FALSE(is_control_flow(n)) << n.label();
  for (const auto& in : runs) {
    reference.push_back(run_reference(pkg.graph(), in));
    testing::expect_same_outputs(reference.back(), pkg.run(in));
  }
  return reference.front();
}

TEST(UnrollLoops, AStaticTripCountStacksEveryIterationsScanValues) {
  ModelBuilder b("loop");
  b.input("x", DType::Float32, Shape{2, 2});
  b.initializer("M", Tensor::scalar_int(DType::Int64, 4));
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"final", "rows"}, "loop").attr("body", doubling_body(false, true));
  b.output("final", DType::Float32, Shape{2, 2});
  b.output("rows", DType::Float32, Shape{4, 2, 2});
  std::vector<std::vector<Tensor>> ref;
  const std::vector<Tensor> out = run_both(b, {{{"x", kX}}}, ref);
  const auto want = expected_iterations(4, -1);
  EXPECT_EQ(out[0].to_doubles(), want.back());
  std::vector<double> rows;
  for (const auto& r : want) rows.insert(rows.end(), r.begin(), r.end());
  EXPECT_EQ(out[1].to_doubles(), rows);
}

TEST(UnrollLoops, AConditionDecidedAtRunTimeStopsTheLoopWhereTheReferenceDoes) {
  ModelBuilder b("while");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("limit", DType::Float32, Shape{});
  b.initializer("M", Tensor::scalar_int(DType::Int64, 6));
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"final"}, "loop").attr("body", doubling_body(true, false));
  b.output("final", DType::Float32, Shape{2, 2});
  std::vector<std::map<std::string, Tensor>> runs;
  const std::vector<double> limits = {0, 30, 100, 1e6};
  for (double limit : limits) runs.push_back({{"x", kX}, {"limit", Tensor::scalar_double(DType::Float32, limit)}});
  std::vector<std::vector<Tensor>> ref;
  run_both(b, runs, ref);
  for (size_t r = 0; r < limits.size(); ++r)
    EXPECT_EQ(ref[r][0].to_doubles(), expected_iterations(6, limits[r]).back()) << "limit " << limits[r];
}

// A trip count known only at run time, bounded by --max-trip-count: the package runs M iterations,
// M from 0 to the bound.
TEST(UnrollLoops, ARunTimeTripCountRunsAsManyIterationsAsItSaysUpToTheBound) {
  ModelBuilder b("run_time_trips");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("M", DType::Int64, Shape{});
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"final"}, "loop").attr("body", doubling_body(false, false));
  b.output("final", DType::Float32, Shape{2, 2});
  testing::TempDir dir;
  b.save(dir.path("loop.onnx"));
  const std::string model = dir.path("loop.onnx");
  const testing::CliResult unbounded = testing::run_kiln("compile " + model + " -o " + dir.path("pkg0"), dir);
  EXPECT_EQ(unbounded.exit_code, 2);
  EXPECT_NE(unbounded.stderr_text.find("or bounded with --max-trip-count loop=N"), std::string::npos) << unbounded.stderr_text;
  const testing::CliResult wrong = testing::run_kiln("compile " + model + " -o " + dir.path("pkg1") + " --max-trip-count nope=3", dir);
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.stderr_text.find("--max-trip-count nope: the graph has no Loop node of that name"), std::string::npos)
      << wrong.stderr_text;

  PipelineOptions po;
  po.bindings.max_trip_counts["loop"] = 5;
  const Graph g = load_model(model, po);
  CompileOptions c;
  c.target = resolve_target("host");
  compile_graph(g, c, dir.path("pkg"));
  const std::string header = testing::read_file(dir.path("pkg/" + c.name + ".h"));
  EXPECT_NE(header.find("/* Limit: node 'loop' (Loop) runs at most 5 iterations (--max-trip-count): a trip count 'M' above "
                        "that runs 5. */"),
            std::string::npos)
      << header;
  for (int64_t m : {0, 2, 5, 9}) {
    const std::map<std::string, Tensor> in = {{"x", kX}, {"M", Tensor::scalar_int(DType::Int64, m)}};
    const std::vector<Tensor> want = run_reference(g, in);
    testing::expect_same_outputs(want, run_package(dir.path("pkg"), c.target, in, 1).outputs);
    const auto iterations = expected_iterations(static_cast<int>(std::min<int64_t>(m, 5)), -1);
    EXPECT_EQ(want[0].to_doubles(), iterations.empty() ? kX.to_doubles() : iterations.back()) << "M = " << m;
  }
}

TEST(UnrollLoops, ATripCountOrConditionThatShapesTheOutputMustBeKnown) {
  ModelBuilder b("unknown");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("M", DType::Int64, Shape{});
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"final"}, "loop").attr("body", doubling_body(false, false));
  b.output("final", DType::Float32, Shape{2, 2});
  EXPECT_NE(testing::prepare_error(b).find("node 'loop' (Loop): its trip count 'M' must be known at compile time"), std::string::npos)
      << testing::prepare_error(b);

  ModelBuilder c("scan_until");
  c.input("x", DType::Float32, Shape{2, 2});
  c.input("go", DType::Bool, Shape{});
  c.initializer("M", Tensor::scalar_int(DType::Int64, 3));
  c.node("Loop", {"M", "go", "x"}, {"final", "rows"}, "loop").attr("body", doubling_body(false, true));
  c.output("final", DType::Float32, Shape{2, 2});
  c.output("rows", DType::Float32, Shape{3, 2, 2});
  EXPECT_NE(testing::prepare_error(c).find("its condition 'go' must be known at compile time: it decides how many rows"), std::string::npos)
      << testing::prepare_error(c);
}

TEST(UnrollLoops, LoopsWithoutABoundAreRefused) {
  ModelBuilder b("unbounded");
  b.input("x", DType::Float32, Shape{2, 2});
  b.input("limit", DType::Float32, Shape{});
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"", "go", "x"}, {"final"}, "loop").attr("body", doubling_body(true, false));
  b.output("final", DType::Float32, Shape{2, 2});
  EXPECT_NE(testing::prepare_error(b).find("runs until a condition decided at run time, with no trip count"), std::string::npos) << testing::prepare_error(b);
}

// A loop that cannot be a StepLoop (its carried value grows) is unrolled, and unrolling is bounded
// in nodes: 4000 iterations of a 20-node body would be 80000 nodes.
TEST(UnrollLoops, AnUnrollingPastTheNodeBudgetIsRefusedBeforeItIsBuilt) {
  ModelBuilder b = testing::growing_loop(4000, 19);
  const std::string e = testing::prepare_error(b);
  EXPECT_NE(e.find("node 'loop' (Loop): unrolled or expanded, the graph would pass 65536 nodes"), std::string::npos) << e;
}

// Malformed Loops and Scans are errors that name the node and what is wrong.
TEST(UnrollLoops, MalformedLoopsAndScansAreNamed) {
  auto loop_with = [](const ModelBuilder& body) {
    ModelBuilder b("bad_loop");
    b.input("x", DType::Float32, Shape{2, 2});
    b.initializer("M", Tensor::scalar_int(DType::Int64, 2));
    b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
    b.node("Loop", {"M", "go", "x"}, {"final"}, "loop").attr("body", body);
    b.output("final", DType::Float32, Shape{2, 2});
    return testing::prepare_error(b);
  };
  ModelBuilder two_inputs("body");
  two_inputs.input("i", DType::Int64, Shape{});
  two_inputs.input("c", DType::Bool, Shape{});
  two_inputs.node("Identity", {"c"}, {"c_out"});
  two_inputs.output("c_out", DType::Bool, Shape{});
  EXPECT_NE(loop_with(two_inputs).find("node 'loop' (Loop): its body has 2 inputs, expected 2 + 1 loop-carried values"),
            std::string::npos)
      << loop_with(two_inputs);
  ModelBuilder no_outputs("body");
  no_outputs.input("i", DType::Int64, Shape{});
  no_outputs.input("c", DType::Bool, Shape{});
  no_outputs.input("x_in", DType::Float32, Shape{2, 2});
  no_outputs.node("Identity", {"c"}, {"c_out"});
  no_outputs.output("c_out", DType::Bool, Shape{});
  EXPECT_NE(loop_with(no_outputs).find("node 'loop' (Loop): its body has 1 outputs, fewer than 1 + 1 loop-carried values"),
            std::string::npos)
      << loop_with(no_outputs);

  auto scan_with = [](const Shape& second, std::vector<int64_t> axes) {
    ModelBuilder body("body");
    body.input("s", DType::Float32, Shape{2});
    body.input("a", DType::Float32, Shape{2});
    body.input("b", DType::Float32, Shape{2});
    body.node("Add", {"s", "a"}, {"s_out"});
    body.output("s_out", DType::Float32, Shape{2});
    ModelBuilder b("bad_scan");
    b.input("init", DType::Float32, Shape{2});
    b.input("xa", DType::Float32, Shape{3, 2});
    b.input("xb", DType::Float32, second);
    b.node("Scan", {"init", "xa", "xb"}, {"total"}, "scan")
        .attr("body", body)
        .attr("num_scan_inputs", int64_t{2})
        .attr("scan_input_axes", axes);
    b.output("total", DType::Float32, Shape{2});
    return testing::prepare_error(b);
  };
  EXPECT_NE(scan_with({4, 2}, {0, 0}).find("node 'scan' (Scan): its scan inputs have lengths 3 and 4"), std::string::npos)
      << scan_with({4, 2}, {0, 0});
  EXPECT_NE(scan_with({3, 2}, {0, 2}).find("node 'scan' (Scan): scan_input_axes[1] is out of range"), std::string::npos)
      << scan_with({3, 2}, {0, 2});
  EXPECT_NE(scan_with({3, 2}, {0}).find("node 'scan' (Scan): attribute 'scan_input_axes' has 1 values, expected 2"),
            std::string::npos)
      << scan_with({3, 2}, {0});
}

// A running sum over x's rows read last to first, its per-step values stacked along axis 1.
TEST(UnrollLoops, AScanReadsAndStacksInTheDirectionsAndAxesItNames) {
  ModelBuilder body = testing::running_sum_body();
  ModelBuilder b("scan");
  b.input("init", DType::Float32, Shape{2});
  b.input("x", DType::Float32, Shape{3, 2});
  b.node("Scan", {"init", "x"}, {"total", "steps"}, "scan")
      .attr("body", body)
      .attr("num_scan_inputs", int64_t{1})
      .attr("scan_input_directions", std::vector<int64_t>{1})
      .attr("scan_output_axes", std::vector<int64_t>{-1});
  b.output("total", DType::Float32, Shape{2});
  b.output("steps", DType::Float32, Shape{2, 3});
  const Tensor init = Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{10, 20});
  const Tensor x = Tensor::from_doubles(DType::Float32, {3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6});
  std::vector<std::vector<Tensor>> ref;
  const std::vector<Tensor> out = run_both(b, {{{"init", init}, {"x", x}}}, ref);
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{19, 32}));
  // Rows 5 6, then 3 4, then 1 2: sums 15 26, 18 30, 19 32, as columns of [2, 3].
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{15, 18, 19, 26, 30, 32}));
}

// Opset 8's Scan: a batch axis first, one sequence per row, each with its own state; sequence_lens
// equal to the length; a shorter one is refused naming the node.
TEST(UnrollLoops, AnOpset8ScanRunsEachBatchRowOnItsOwn) {
  ModelBuilder body("body");
  body.input("sum_in", DType::Float32, Shape{2});
  body.input("row", DType::Float32, Shape{2});
  body.node("Add", {"sum_in", "row"}, {"sum_out"});
  body.node("Mul", {"sum_out", "sum_out"}, {"square"});
  body.output("sum_out", DType::Float32, Shape{2});
  body.output("square", DType::Float32, Shape{2});
  auto scan8 = [&](int64_t len) {
    ModelBuilder b("scan8", 8, 4);
    b.input("init", DType::Float32, Shape{2, 2});
    b.input("x", DType::Float32, Shape{2, 3, 2});
    b.initializer("lens", Tensor::from_ints(DType::Int32, {2}, std::vector<int64_t>{3, len}));
    b.node("Scan", {"lens", "init", "x"}, {"total", "squares"}, "scan8")
        .attr("body", body)
        .attr("num_scan_inputs", int64_t{1})
        .attr("directions", std::vector<int64_t>{0});
    b.output("total", DType::Float32, Shape{2, 2});
    b.output("squares", DType::Float32, Shape{2, 3, 2});
    return b;
  };
  ModelBuilder b = scan8(3);
  const Tensor init = Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{0, 0, 1, 1});
  const Tensor x = Tensor::from_doubles(DType::Float32, {2, 3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1});
  std::vector<std::vector<Tensor>> ref;
  const std::vector<Tensor> out = run_both(b, {{{"init", init}, {"x", x}}}, ref);
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{9, 12, 4, 4}));
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{1, 4, 16, 36, 81, 144, 4, 4, 9, 9, 16, 16}));
  ModelBuilder shorter = scan8(2);
  EXPECT_NE(testing::prepare_error(shorter).find("node 'scan8' (Scan): a sequence_lens shorter than the sequence (2 of 3)"),
            std::string::npos)
      << testing::prepare_error(shorter);
}

}  // namespace
}  // namespace kiln
