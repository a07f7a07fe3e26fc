// gru_refine: recurrent refinement in the shape of RAFT's update operator (Teed and Deng, ECCV 2020),
// as a scripted PyTorch export writes it: a Loop of 8 iterations whose body is a convolutional GRU
// over a hidden state of 32 channels, fed by 32 channels of context, with a 2-channel prediction
// head whose per-iteration outputs are the Loop's scan output (RAFT supervises every iteration's
// flow). The point is the Loop: carried state, a scan output, and a body with convs and gates.
// Input: the context features [batch, 32, size, size] (default 16); outputs: the final state and
// the 8 predictions [8, batch, 2, size, size].
#include "frontend/zoo/weights.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {

ModelBuilder build_gru_refine(const ZooOptions& o) {
  constexpr int64_t kHidden = 32, kContext = 32, kIterations = 8;
  const int64_t size = o.size ? o.size : 16;
  WeightInit w(o.seed);
  // One 3x3 conv of the body: `out` channels from `in`, He-initialised, with a bias.
  auto conv = [&](ModelBuilder& body, const std::string& name, const std::string& x, int64_t in, int64_t out) {
    body.initializer(name + ".w", w.he_uniform({out, in, 3, 3}, in * 9));
    body.initializer(name + ".b", w.uniform_tensor({out}, -0.05, 0.05));
    body.node("Conv", {x, name + ".w", name + ".b"}, {name}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
    return name;
  };
  ModelBuilder body("gru_body");
  body.input("iteration", DType::Int64, Shape{});
  body.input("cond", DType::Bool, Shape{});
  body.input("h", DType::Float32, Shape{o.batch, kHidden, size, size});
  body.node("Concat", {"h", "context"}, {"hx"}).attr("axis", int64_t{1});
  body.node("Sigmoid", {conv(body, "convz", "hx", kHidden + kContext, kHidden)}, {"z"});
  body.node("Sigmoid", {conv(body, "convr", "hx", kHidden + kContext, kHidden)}, {"r"});
  body.node("Mul", {"r", "h"}, {"rh"});
  body.node("Concat", {"rh", "context"}, {"rhx"}).attr("axis", int64_t{1});
  body.node("Tanh", {conv(body, "convq", "rhx", kHidden + kContext, kHidden)}, {"q"});
  body.node("Sub", {"q", "h"}, {"dq"});  // h + z (q - h) = (1 - z) h + z q
  body.node("Mul", {"z", "dq"}, {"step"});
  body.node("Add", {"h", "step"}, {"h_next"});
  body.node("Relu", {conv(body, "head1", "h_next", kHidden, kHidden)}, {"head"});
  conv(body, "flow", "head", kHidden, 2);
  body.node("Identity", {"cond"}, {"cond_out"});
  body.output("cond_out", DType::Bool, Shape{});
  body.output("h_next", DType::Float32, Shape{o.batch, kHidden, size, size});
  body.output("flow", DType::Float32, Shape{o.batch, 2, size, size});

  ModelBuilder b("gru_refine", 17);
  b.input("context", DType::Float32, Shape{o.batch, kContext, size, size});
  b.initializer("iterations", Tensor::scalar_int(DType::Int64, kIterations));
  b.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  b.initializer("h0", Tensor(DType::Float32, {o.batch, kHidden, size, size}));
  b.node("Loop", {"iterations", "go", "h0"}, {"hidden", "flows"}, "refine").attr("body", body);
  b.output("hidden", DType::Float32, Shape{o.batch, kHidden, size, size});
  b.output("flows", DType::Float32, Shape{kIterations, o.batch, 2, size, size});
  return b;
}

}  // namespace kiln
