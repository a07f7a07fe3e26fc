#include "tests/frontend/partition/partition_models.h"

#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/zoo/weights.h"

namespace kiln::testing {

Graph load_built(const ModelBuilder& b) {
  Graph g = import_onnx_bytes(b.serialize(), "test-model");
  bind_input_shapes(g, {});
  infer_shapes(g);
  remove_dead_nodes(g);
  return g;
}

Graph load_zoo(const std::string& name, const ZooOptions& opts) { return load_built(build_zoo_model(name, opts)); }

namespace {
using Ints = std::vector<int64_t>;
Tensor scalar(double v) { return Tensor::scalar_double(DType::Float32, v); }
}  // namespace

ModelBuilder conv_bias_relu_model() {
  WeightInit w(7);
  ModelBuilder b("conv_bias_relu", 17);
  b.input("x", DType::Float32, Shape{1, 3, 8, 8});
  b.initializer("w", w.he_uniform({4, 3, 3, 3}, 27));
  b.initializer("b", w.uniform_tensor({4}, -0.1, 0.1));
  b.node("Conv", {"x", "w", "b"}, {"conv"}, "conv").attr("pads", Ints{1, 1, 1, 1});
  b.node("Relu", {"conv"}, {"y"}, "relu");
  b.output("y", DType::Float32, Shape{1, 4, 8, 8});
  return b;
}

ModelBuilder matmul_add_gelu_model() {
  WeightInit w(8);
  ModelBuilder b("matmul_add_gelu", 17);
  b.input("x", DType::Float32, Shape{2, 8});
  b.initializer("w", w.he_uniform({8, 16}, 8));
  b.initializer("b", w.uniform_tensor({16}, -0.1, 0.1));
  b.initializer("sqrt2", scalar(1.4142135623730951));
  b.initializer("one", scalar(1.0));
  b.initializer("half", scalar(0.5));
  b.node("MatMul", {"x", "w"}, {"mm"}, "matmul");
  b.node("Add", {"mm", "b"}, {"h"}, "bias");
  b.node("Div", {"h", "sqrt2"}, {"scaled"}, "gelu.div");
  b.node("Erf", {"scaled"}, {"erf"}, "gelu.erf");
  b.node("Add", {"erf", "one"}, {"erf1"}, "gelu.add");
  b.node("Mul", {"h", "erf1"}, {"prod"}, "gelu.mul");
  b.node("Mul", {"prod", "half"}, {"y"}, "gelu.half");
  b.output("y", DType::Float32, Shape{2, 16});
  return b;
}

ModelBuilder attention_model() {
  WeightInit w(9);
  ModelBuilder b("attention", 17);
  b.input("q", DType::Float32, Shape{1, 2, 4, 8});
  b.input("k", DType::Float32, Shape{1, 2, 8, 4});
  b.input("v", DType::Float32, Shape{1, 2, 4, 8});
  b.initializer("scale", scalar(0.35));
  b.initializer("mask", w.uniform_tensor({1, 1, 1, 4}, -1, 0));
  b.node("MatMul", {"q", "k"}, {"scores"}, "qk");
  b.node("Mul", {"scores", "scale"}, {"scaled"}, "scale");
  b.node("Add", {"scaled", "mask"}, {"masked"}, "mask");
  b.node("Softmax", {"masked"}, {"probs"}, "softmax").attr("axis", int64_t{-1});
  b.node("MatMul", {"probs", "v"}, {"y"}, "pv");
  b.output("y", DType::Float32, Shape{1, 2, 4, 8});
  return b;
}

namespace {

void add_block(ModelBuilder& b, const BlockSpec& s) {
  WeightInit w(s.seed);
  const std::string& p = s.prefix;
  const int64_t c = 4;
  b.input(s.input, DType::Float32, Shape{1, c, s.size, s.size});
  b.initializer(p + "w1", w.he_uniform({c, c, 3, 3}, c * 9));
  b.initializer(p + "b1", w.uniform_tensor({c}, -0.1, 0.1));
  b.initializer(p + "w2", w.he_uniform({c, c, 3, 3}, c * 9));
  b.initializer(p + "b2", w.uniform_tensor({c}, -0.1, 0.1));
  b.initializer(p + "ws", w.he_uniform({c, c, 1, 1}, c));
  b.initializer(p + "bs", w.uniform_tensor({c}, -0.1, 0.1));
  auto shortcut = [&] { b.node("Conv", {s.input, p + "ws", p + "bs"}, {p + "short"}, p + "shortcut_conv"); };
  if (s.shortcut_first) shortcut();
  b.node("Conv", {s.input, p + "w1", p + "b1"}, {p + "c1"}, p + "conv1").attr("pads", Ints{1, 1, 1, 1});
  b.node("Relu", {p + "c1"}, {p + "r1"}, p + "relu1");
  b.node("Conv", {p + "r1", p + "w2", p + "b2"}, {p + "c2"}, p + "conv2").attr("pads", Ints{1, 1, 1, 1});
  if (!s.shortcut_first) shortcut();
  b.node("Add", {p + "c2", p + "short"}, {p + "sum"}, p + "add");
  b.node("Relu", {p + "sum"}, {p + "out"}, p + "relu_out");
  b.output(p + "out", DType::Float32, Shape{1, c, s.size, s.size});
}

}  // namespace

ModelBuilder residual_blocks_model(const std::vector<BlockSpec>& blocks) {
  ModelBuilder b("residual_blocks", 17);
  for (const BlockSpec& s : blocks) add_block(b, s);
  return b;
}

ModelBuilder tiny_transformer_model() {
  WeightInit w(11);
  const int64_t t = 4, d = 8, f = 16;
  ModelBuilder b("tiny_transformer", 17);
  b.input("x", DType::Float32, Shape{1, t, d});
  auto dense = [&](const std::string& name, const std::string& in, int64_t n_in, int64_t n_out) {
    b.initializer(name + ".w", w.he_uniform({n_in, n_out}, n_in));
    b.initializer(name + ".b", w.uniform_tensor({n_out}, -0.1, 0.1));
    b.node("MatMul", {in, name + ".w"}, {name + ".mm"}, name + ".matmul");
    b.node("Add", {name + ".mm", name + ".b"}, {name}, name + ".bias");
  };
  auto layer_norm = [&](const std::string& name, const std::string& in) {
    b.initializer(name + ".scale", w.uniform_tensor({d}, 0.5, 1.5));
    b.initializer(name + ".bias", w.uniform_tensor({d}, -0.1, 0.1));
    b.node("LayerNormalization", {in, name + ".scale", name + ".bias"}, {name}, name).attr("axis", int64_t{-1});
  };
  b.initializer("scale", scalar(0.35));
  dense("q", "x", d, d);
  dense("k", "x", d, d);
  dense("v", "x", d, d);
  b.node("Transpose", {"k"}, {"kt"}, "k.transpose").attr("perm", Ints{0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"scores"}, "qk");
  b.node("Mul", {"scores", "scale"}, {"scaled"}, "qk.scale");
  b.node("Softmax", {"scaled"}, {"probs"}, "softmax").attr("axis", int64_t{-1});
  b.node("MatMul", {"probs", "v"}, {"context"}, "pv");
  dense("o", "context", d, d);
  b.node("Add", {"x", "o"}, {"res1"}, "residual1");
  layer_norm("ln1", "res1");
  dense("ff1", "ln1", d, f);
  b.initializer("sqrt2", scalar(1.4142135623730951));
  b.initializer("one", scalar(1.0));
  b.initializer("half", scalar(0.5));
  b.node("Div", {"ff1", "sqrt2"}, {"g.scaled"}, "gelu.div");
  b.node("Erf", {"g.scaled"}, {"g.erf"}, "gelu.erf");
  b.node("Add", {"g.erf", "one"}, {"g.erf1"}, "gelu.add");
  b.node("Mul", {"ff1", "g.erf1"}, {"g.prod"}, "gelu.mul");
  b.node("Mul", {"g.prod", "half"}, {"gelu"}, "gelu.half");
  dense("ff2", "gelu", f, d);
  b.node("Add", {"ln1", "ff2"}, {"res2"}, "residual2");
  layer_norm("ln2", "res2");
  b.output("ln2", DType::Float32, Shape{1, t, d});
  return b;
}

}  // namespace kiln::testing
