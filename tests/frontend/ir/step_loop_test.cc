// kiln.StepLoop (frontend/ir/step_loop.h): the reference runs the body once per iteration, and the
// compiled package runs it in a loop (scheduler/lower/lower_model.h) and must agree, including the
// contract's corners: carried values passed on swapped (so no state may be overwritten before it is
// read), a scan output stacked in reverse, an invariant passed straight out, the iteration number.
#include "frontend/ir/step_loop.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/ops/op_registry.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/step_loop_bodies.h"
#include "frontend/reference/interpreter.h"
#include "frontend/partition/partition.h"
#include "scheduler/lower/lower_model.h"
#include "scheduler/te/lower_graph.h"
#include "scheduler/te/te_eval.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

Node node(const std::string& op, std::vector<std::string> ins, const std::string& out, Attributes attrs = {}) {
  Node n;
  n.name = out;
  n.op_type = op;
  n.opset = 13;
  n.inputs = std::move(ins);
  n.outputs = {out};
  n.attrs = std::move(attrs);
  return n;
}

// Body: a, b carried, w invariant;  a' = b,  b' = a + w * iter;  scans: a * b (reversed), w.
std::shared_ptr<Graph> swap_body() {
  auto b = std::make_shared<Graph>();
  b->name = "body";
  for (const char* v : {"a", "b", "w"}) b->add_value(v, DType::Float32, {4});
  b->add_value("iter", DType::Int64, {});
  b->inputs = {"iter", "a", "b", "w"};
  for (const char* v : {"t", "wt", "b_next", "ab"}) b->values[v].name = v;
  b->nodes = {node("Cast", {"iter"}, "t", {{"to", AttrValue(int64_t{1})}}), node("Mul", {"w", "t"}, "wt"),
              node("Add", {"a", "wt"}, "b_next"), node("Mul", {"a", "b"}, "ab")};
  b->outputs = {"b", "b_next", "ab", "w"};
  infer_shapes(*b);
  return b;
}

Graph loop_model(int64_t trips, std::shared_ptr<Graph> body = swap_body()) {
  Graph g;
  g.name = "loop";
  g.source = "loop.onnx";
  g.opsets[""] = 13;
  for (const char* v : {"x", "y", "w"}) g.add_value(v, DType::Float32, {4});
  g.inputs = {"x", "y", "w"};
  const std::vector<std::string> outs{"a_last", "b_last", "ab_steps", "w_steps"};
  for (const std::string& o : outs) g.values[o].name = o;
  g.nodes.push_back(make_step_loop("loop", {std::move(body), trips, 2, {1, 0}}, {"x", "y", "w"}, outs));
  g.outputs = outs;
  infer_shapes(g);
  return g;
}

std::map<std::string, Tensor> loop_inputs() {
  return {{"x", Tensor::from_doubles(DType::Float32, {4}, std::vector<double>{1, 2, 3, 4})},
          {"y", Tensor::from_doubles(DType::Float32, {4}, std::vector<double>{-1, 0.5, 2, 0})},
          {"w", Tensor::from_doubles(DType::Float32, {4}, std::vector<double>{0.25, -1, 2, 3})}};
}

TEST(StepLoop, TheReferenceRunsTheBodyOncePerIteration) {
  const int64_t trips = 5;
  const Graph g = loop_model(trips);
  EXPECT_EQ(g.value("ab_steps").shape, (Shape{trips, 4}));
  // Two Muls and an Add of 4 elements an iteration (a Cast counts none).
  const OpDef* op = find_op("kiln", "StepLoop");
  ASSERT_TRUE(op && op->flops);
  EXPECT_EQ(op->flops(NodeShapes{g.nodes[0], {}, {}}), 3.0 * 4 * trips);
  const std::map<std::string, Tensor> in = loop_inputs();
  const std::vector<Tensor> out = run_reference(g, in);
  for (int64_t e = 0; e < 4; ++e) {
    double a = in.at("x").get_double(e), b = in.at("y").get_double(e);
    const double w = in.at("w").get_double(e);
    std::vector<double> ab;
    for (int64_t k = 0; k < trips; ++k) {
      ab.push_back(a * b);
      const double next_b = a + w * static_cast<double>(k);
      a = b;
      b = next_b;
    }
    EXPECT_DOUBLE_EQ(out[0].get_double(e), a);
    EXPECT_DOUBLE_EQ(out[1].get_double(e), b);
    for (int64_t k = 0; k < trips; ++k) {
      EXPECT_DOUBLE_EQ(out[2].get_double((trips - 1 - k) * 4 + e), ab[static_cast<size_t>(k)]) << "reversed scan, step " << k;
      EXPECT_DOUBLE_EQ(out[3].get_double(k * 4 + e), w);
    }
  }
}

TEST(StepLoop, TheCompiledLoopMatchesTheReference) {
  const Graph g = loop_model(7);
  testing::TempDir dir;
  const testing::HostPackage pkg(g, dir);
  const std::map<std::string, Tensor> in = loop_inputs();
  testing::expect_same_outputs(run_reference(g, in), pkg.run(in));
}

// Engines without loops unroll it (step_loop_bodies.h): the te engine through the StepLoop's
// lowering, GPU programs in the graph; both compute what the reference does.
TEST(StepLoop, UnrolledItComputesTheSame) {
  const Graph g = loop_model(6);
  const std::map<std::string, Tensor> in = loop_inputs();
  const std::vector<Tensor> want = run_reference(g, in);
  te::LoweredGraph lg = te::lower_graph(g);
  std::map<const te::TensorNode*, Tensor> bound;
  for (const auto& [name, t] : lg.inputs) bound[t.get()] = in.at(name);
  testing::expect_same_outputs(want, te::evaluate(lg.dag, bound));

  Graph unrolled = g;
  EXPECT_EQ(unroll_step_loops(unrolled), 1);
  for (const Node& n : unrolled.nodes) EXPECT_FALSE(is_step_loop(n));
  testing::expect_same_outputs(want, run_reference(unrolled, in));
}

// Body: a [1, 16] carried through four MatMuls in a row; m1..m3 live within one iteration.
Graph matmul_chain_loop(int64_t trips) {
  auto b = std::make_shared<Graph>();
  b->name = "body";
  b->add_value("iter", DType::Int64, {});
  b->add_value("a", DType::Float32, {1, 16});
  b->inputs = {"iter", "a"};
  std::string v = "a";
  for (int i = 1; i <= 4; ++i) {
    const std::string w = "w" + std::to_string(i), out = i < 4 ? "m" + std::to_string(i) : "a_next";
    // Scaled so the values stay near 1 through the chain (float32 keeps its relative error small).
    std::vector<double> scaled = testing::random_weights({16, 16}, static_cast<uint32_t>(i)).to_doubles();
    for (double& e : scaled) e *= 0.4;
    b->add_constant(w, Tensor::from_doubles(DType::Float32, {16, 16}, scaled));
    b->values[out].name = out;
    b->nodes.push_back(node("MatMul", {v, w}, out));
    v = out;
  }
  b->outputs = {"a_next"};
  infer_shapes(*b);
  Graph g;
  g.name = "chain";
  g.source = "chain.onnx";
  g.opsets[""] = 13;
  g.add_value("x", DType::Float32, {1, 16});
  g.inputs = {"x"};
  g.values["y"].name = "y";
  g.nodes.push_back(make_step_loop("loop", {b, trips, 1, {}}, {"x"}, {"y"}));
  g.outputs = {"y"};
  infer_shapes(g);
  return g;
}

// The memory plan sees a loop's iteration: a value of the body lives from the statement that writes
// it to the last that reads it, so m1 and m3 may share bytes; the carried state lives throughout.
TEST(StepLoop, BodyValuesLiveWithinTheirIteration) {
  const Graph g = optimize_graph(matmul_chain_loop(5), 512);
  const SubgraphDAG sdag = partition_graph(g);
  const lower::ModelProgram p =
      lower::lower_model(g, sdag, "chain", lower::default_subgraph_scheduler(lower::schedule_params_for(512)));
  std::map<std::string, const lower::ModelParam*> by_name;
  for (size_t i = 0; i < p.params.size(); ++i) by_name[p.func.params[i]->name] = &p.params[i];
  ASSERT_TRUE(by_name.count("loop/m1") && by_name.count("loop/m3") && by_name.count("y")) << lower::print_model_params(p);
  const lower::ModelParam &m1 = *by_name["loop/m1"], &m3 = *by_name["loop/m3"], &state = *by_name["y"];
  EXPECT_LT(m1.last_step, m3.first_step) << lower::print_model_params(p);
  EXPECT_LE(state.first_step, m1.first_step);
  EXPECT_GE(state.last_step, m3.last_step);
  testing::TempDir dir;
  const testing::HostPackage pkg(matmul_chain_loop(5), dir);
  const std::map<std::string, Tensor> in = {{"x", testing::random_weights({1, 16}, 9)}};
  testing::expect_same_outputs(run_reference(pkg.graph(), in), pkg.run(in));
}

TEST(StepLoop, ABodyThatBreaksTheContractIsNamed) {
  auto body = swap_body();
  body->inputs.pop_back();  // w
  Graph g = loop_model(3);
  g.nodes[0].attrs["body"] = SubgraphAttr{body};
  try {
    read_step_loop(g.nodes[0]);
    FAIL() << "a body with too few inputs was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'loop' (StepLoop): the body takes 3 inputs"), std::string::npos) << e.what();
  }
  body = swap_body();
  body->outputs[0] = "ab";  // still float32[4]: fine; then a carried value of another shape
  body->value("ab").shape = {2, 2};
  g.nodes[0].attrs["body"] = SubgraphAttr{body};
  try {
    read_step_loop(g.nodes[0]);
    FAIL() << "a carried value that changes shape was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("carried value 0 enters the body as float32 4 and leaves it as float32 2x2"),
              std::string::npos)
        << e.what();
  }
  g.nodes[0].attrs["body"] = SubgraphAttr{swap_body()};
  g.nodes[0].attrs["trip_count"] = AttrValue(int64_t{0});
  EXPECT_THROW(read_step_loop(g.nodes[0]), Error);
}

}  // namespace
}  // namespace kiln
