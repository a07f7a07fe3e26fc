// tiny_cnn: the demo model. Small enough to read in `kiln inspect --verbose`, and it touches the op
// families a CNN classifier needs: Conv, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm, Softmax.
#include "frontend/zoo/zoo_models.h"

#include "frontend/zoo/weights.h"

namespace kiln {

ModelBuilder build_tiny_cnn(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b("tiny_cnn", 17);
  b.input("image", DType::Float32, Shape{o.batch, 1, 16, 16});
  b.initializer("conv1.weight", w.he_uniform({8, 1, 3, 3}, 9));
  b.initializer("conv1.bias", w.uniform_tensor({8}, -0.1, 0.1));
  b.initializer("conv2.weight", w.he_uniform({16, 8, 3, 3}, 72));
  b.initializer("conv2.bias", w.uniform_tensor({16}, -0.1, 0.1));
  b.initializer("fc.weight", w.he_uniform({10, 16}, 16));
  b.initializer("fc.bias", w.uniform_tensor({10}, -0.1, 0.1));
  b.node("Conv", {"image", "conv1.weight", "conv1.bias"}, {"conv1"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"conv1"}, {"relu1"});
  b.node("MaxPool", {"relu1"}, {"pool1"})
      .attr("kernel_shape", std::vector<int64_t>{2, 2})
      .attr("strides", std::vector<int64_t>{2, 2});
  b.node("Conv", {"pool1", "conv2.weight", "conv2.bias"}, {"conv2"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"conv2"}, {"relu2"});
  b.node("GlobalAveragePool", {"relu2"}, {"gap"});
  b.node("Flatten", {"gap"}, {"features"});
  b.node("Gemm", {"features", "fc.weight", "fc.bias"}, {"logits"}).attr("transB", int64_t{1});
  b.node("Softmax", {"logits"}, {"probabilities"}).attr("axis", int64_t{-1});
  b.output("probabilities", DType::Float32, Shape{o.batch, 10});
  return b;
}

}  // namespace kiln
