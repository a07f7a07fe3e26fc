#include "tests/frontend/test_models.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/reference/interpreter.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_package.h"

namespace kiln::testing {

TempDir::TempDir() {
  std::random_device rd;
  dir_ = std::filesystem::temp_directory_path() / ("kiln-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

CliResult run_kiln(const std::string& args, const TempDir& dir) {
  std::string err_file = dir.path("stderr.txt");
  std::string cmd = std::string("timeout 60 ") + KILN_BINARY + " " + args + " >/dev/null 2>" + err_file;
  int status = std::system(cmd.c_str());
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool have_tool(const std::string& tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

CliOutput run_kiln_output(const std::string& args, const TempDir& dir, int timeout_s) {
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + KILN_BINARY + " " + args + " >" +
                          dir.path("out.txt") + " 2>" + dir.path("err.txt");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir.path("out.txt")), read_file(dir.path("err.txt"))};
}

Tensor random_weights(const Shape& shape, uint32_t seed) {
  Tensor t(DType::Float32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  for (int64_t i = 0; i < num_elements(shape); ++i) t.set_double(i, d(rng));
  return t;
}

ModelBuilder relu_model() {
  ModelBuilder b("relu", 13);
  b.input("x", DType::Float32, Shape{1, 4});
  b.node("Relu", {"x"}, {"y"}, "the_relu");
  b.output("y", DType::Float32, Shape{1, 4});
  return b;
}

ModelBuilder scale_loop_body(const ScaleLoopBody& spec) {
  ModelBuilder body("body");
  body.input("i", DType::Int64, Shape{});
  body.input("cond_in", DType::Bool, Shape{});
  body.input("x_in", DType::Float32, Shape{2, 2});
  body.initializer("scale", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{spec.scale}));
  body.node("Cast", {"i"}, {"fi"}).attr("to", int64_t{1});
  body.node("Mul", {"x_in", "scale"}, {"scaled"});
  body.node("Add", {"scaled", "fi"}, spec.bias ? std::vector<std::string>{"shifted"} : std::vector<std::string>{"x_out"});
  if (spec.bias) body.node("Add", {"shifted", "bias"}, {"x_out"});
  if (spec.until_limit) {
    body.node("ReduceSum", {"x_out"}, {"total"}).attr("keepdims", int64_t{0});
    body.node("Less", {"total", "limit"}, {"cond_out"});
  } else {
    body.node("Identity", {"cond_in"}, {"cond_out"});
  }
  body.output("cond_out", DType::Bool, Shape{});
  body.output("x_out", DType::Float32, Shape{2, 2});
  if (spec.scan) {
    body.node("Identity", {"x_out"}, {"row"});
    body.output("row", DType::Float32, Shape{2, 2});
  }
  return body;
}

ModelBuilder growing_loop(int64_t trips, int negations) {
  ModelBuilder body("body");
  body.input("i", DType::Int64, Shape{});
  body.input("cond_in", DType::Bool, Shape{});
  body.input("acc_in", DType::Float32, Shape{});
  std::string v = "x";
  for (int i = 0; i < negations; ++i) {
    body.node("Neg", {v}, {"n" + std::to_string(i)});
    v = "n" + std::to_string(i);
  }
  body.node("Concat", {"acc_in", v}, {"acc_out"}).attr("axis", int64_t{0});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out", DType::Bool, Shape{});
  body.output("acc_out", DType::Float32, Shape{});
  ModelBuilder b("growing");
  b.input("x", DType::Float32, Shape{1});
  b.initializer("M", Tensor::scalar_int(DType::Int64, trips));
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.node("Loop", {"M", "go", "x"}, {"acc"}, "loop").attr("body", body);
  b.output("acc", DType::Float32, Shape{trips + 1});
  return b;
}

ModelBuilder running_sum_body() {
  ModelBuilder body("body");
  body.input("sum_in", DType::Float32, Shape{2});
  body.input("row", DType::Float32, Shape{2});
  body.node("Add", {"sum_in", "row"}, {"sum_out"});
  body.node("Identity", {"sum_out"}, {"step"});
  body.output("sum_out", DType::Float32, Shape{2});
  body.output("step", DType::Float32, Shape{2});
  return body;
}

ModelBuilder two_conv_branches() {
  ModelBuilder b("two_branches");
  b.input("x", DType::Float32, Shape{1, 16, 8, 8});
  uint32_t seed = 1;
  auto conv = [&](const std::string& name, const std::string& in, int64_t channels, int64_t k) {
    b.initializer(name + ".w", random_weights({32, channels, k, k}, seed++));
    b.initializer(name + ".b", random_weights({32}, seed++));
    b.node("Conv", {in, name + ".w", name + ".b"}, {name + ".conv"}).attr("pads", std::vector<int64_t>(4, (k - 1) / 2));
    b.node("Relu", {name + ".conv"}, {name});
  };
  conv("b", "x", 16, 3);
  conv("c", "x", 16, 3);
  conv("b2", "b", 32, 1);
  conv("c2", "c", 32, 1);
  b.output("b2", DType::Float32, Shape{1, 32, 8, 8});
  b.output("c2", DType::Float32, Shape{1, 32, 8, 8});
  return b;
}

ModelBuilder recurrent_model(const RecurrentModel& m) {
  const int64_t gates = m.op == "LSTM" ? 4 : m.op == "GRU" ? 3 : 1;
  const int64_t dirs = m.direction == "bidirectional" ? 2 : 1, gh = gates * m.hidden;
  const Shape state = m.layout == 0 ? Shape{dirs, m.batch, m.hidden} : Shape{m.batch, dirs, m.hidden};
  ModelBuilder b(m.op + "_model", 14);
  b.input("X", DType::Float32, m.layout == 0 ? Shape{m.seq, m.batch, m.input} : Shape{m.batch, m.seq, m.input});
  b.initializer("W", random_weights({dirs, gh, m.input}, 101));
  b.initializer("R", random_weights({dirs, gh, m.hidden}, 102));
  std::vector<std::string> ins = {"X", "W", "R", "", "", "", "", ""};
  if (m.bias) b.initializer(ins[3] = "B", random_weights({dirs, 2 * gh}, 103));
  if (!m.sequence_lens.empty()) {
    ins[4] = "sequence_lens";
    if (m.lens_input) b.input("sequence_lens", DType::Int32, Shape{m.batch});
    else b.initializer("sequence_lens", Tensor::from_ints(DType::Int32, {m.batch}, m.sequence_lens));
  }
  if (m.initial_state) {
    b.initializer(ins[5] = "initial_h", random_weights(state, 104));
    if (m.op == "LSTM") b.initializer(ins[6] = "initial_c", random_weights(state, 105));
  }
  if (m.peepholes) b.initializer(ins[7] = "P", random_weights({dirs, 3 * m.hidden}, 106));
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  std::vector<std::string> outs = {"Y", "Y_h"};
  if (m.op == "LSTM") outs.push_back("Y_c");
  ModelBuilder::NodeRef n = b.node(m.op, ins, outs, "cell");
  n.attr("hidden_size", m.hidden_size_attr ? m.hidden_size_attr : m.hidden).attr("direction", m.direction).attr("layout", m.layout);
  if (m.attrs) m.attrs(n);
  b.output("Y", DType::Float32, m.layout == 0 ? Shape{m.seq, dirs, m.batch, m.hidden} : Shape{m.batch, m.seq, dirs, m.hidden});
  for (size_t i = 1; i < outs.size(); ++i) b.output(outs[i], DType::Float32, state);
  return b;
}

Graph prepared_graph(ModelBuilder& b) {
  Graph g = import_onnx_bytes(b.serialize(), "test.onnx");
  bind_input_shapes(g, {});
  infer_shapes(g);
  remove_dead_nodes(g);
  return g;
}

std::string prepare_error(ModelBuilder& b) {
  try {
    prepared_graph(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

HostPackage::HostPackage(ModelBuilder& b, const TempDir& dir, const ShapeBindings& bindings)
    : dir_(dir.path("pkg")), target_(resolve_target("host")) {
  b.save(dir.path("model.onnx"));
  PipelineOptions opts;
  opts.bindings = bindings;
  graph_ = load_model(dir.path("model.onnx"), opts);
  CompileOptions c;
  c.target = target_;
  std::optional<package::PackageInfo> info = compile_graph(graph_, c, dir_);
  if (!info) throw Error("compile_graph wrote no package");
  info_ = *info;
}

HostPackage::HostPackage(const Graph& g, const TempDir& dir, const std::string& target)
    : graph_(g), dir_(dir.path("pkg")), target_(resolve_target(target)) {
  CompileOptions c;
  c.target = target_;
  std::optional<package::PackageInfo> info = compile_graph(graph_, c, dir_);
  if (!info) throw Error("compile_graph wrote no package");
  info_ = *info;
}

std::vector<Tensor> HostPackage::run(const std::map<std::string, Tensor>& inputs) const {
  return run_package(dir_, target_, inputs, 1).outputs;
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

void expect_same_outputs(const std::vector<Tensor>& before, const std::vector<Tensor>& after) {
  ASSERT_EQ(before.size(), after.size());
  for (size_t o = 0; o < before.size(); ++o) {
    ASSERT_EQ(before[o].shape(), after[o].shape()) << "output " << o;
    for (int64_t i = 0; i < before[o].size(); ++i)
      EXPECT_NEAR(after[o].get_double(i), before[o].get_double(i), 1e-5 + 1e-5 * std::abs(before[o].get_double(i)))
          << "output " << o << " element " << i;
  }
}

int rewrite_and_compare(Graph& g, const std::function<int(Graph&)>& rewrite) {
  std::map<std::string, Tensor> in;
  uint32_t seed = 7;
  for (const std::string& name : g.inputs) in.emplace(name, random_weights(g.value(name).shape, seed++));
  const std::vector<Tensor> before = run_reference(g, in);
  const int rewritten = rewrite(g);
  remove_dead_nodes(g);
  expect_same_outputs(before, run_reference(g, in));
  return rewritten;
}

}  // namespace kiln::testing
