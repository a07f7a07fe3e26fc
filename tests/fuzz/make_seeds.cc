// Writes the fuzzer's seed corpus: small models from kiln's own builder, covering raw and typed
// initializers, attributes of every kind, symbolic dimensions and several dtypes.
#include <cstdio>
#include <string>

#include "frontend/onnx/model_builder.h"
#include "frontend/zoo/zoo.h"

using namespace kiln;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  build_zoo_model("tiny_cnn", ZooOptions{}).save(dir + "/tiny_cnn.onnx");

  ModelBuilder b("seed_attrs", 13);
  b.input("x", DType::Float32, std::vector<Dim>{{-1, "batch"}, {4, ""}});
  b.input("i", DType::Int64, Shape{2});
  b.initializer("w", Tensor::from_doubles(DType::Float32, {4, 3}, std::vector<double>(12, 0.5)));
  b.initializer("shape", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{-1, 3}));
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Reshape", {"y", "shape"}, {"z"});
  b.node("Transpose", {"z"}, {"t"}).attr("perm", std::vector<int64_t>{1, 0});
  b.node("Cast", {"i"}, {"f"}).attr("to", int64_t{1});
  b.node("LeakyRelu", {"t"}, {"r"}).attr("alpha", 0.1);
  b.node("Resize", {"r", "", "s"}, {"q"}).attr("mode", std::string("linear"));
  b.initializer("s", Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{1.0, 2.0}));
  b.output("q", DType::Float32, Shape{3, 2});
  b.output("f", DType::Float32, Shape{2});
  b.save(dir + "/attrs.onnx");

  ModelBuilder h("seed_half", 11, 6);
  h.input("x", DType::Float16, Shape{1, 8});
  h.initializer("c", Tensor::from_doubles(DType::Float16, {1, 8}, std::vector<double>(8, 0.25)));
  h.node("Add", {"x", "c"}, {"y"});
  h.output("y", DType::Float16, Shape{1, 8});
  h.save(dir + "/half.onnx");
  return 0;
}
