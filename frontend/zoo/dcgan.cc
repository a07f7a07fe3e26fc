// dcgan: the DCGAN generator of Radford, Metz and Chintala (2016), in the layout of the PyTorch DCGAN
// example the Ansor evaluation (and most benchmarks) use: nz=100, ngf=64, nc=3.
//
//   z [B,100,1,1]
//   ConvTranspose 100->512, k4 s1 p0  -> [B,512,4,4]    BN, Relu
//   ConvTranspose 512->256, k4 s2 p1  -> [B,256,8,8]    BN, Relu
//   ConvTranspose 256->128, k4 s2 p1  -> [B,128,16,16]  BN, Relu
//   ConvTranspose 128->64,  k4 s2 p1  -> [B,64,32,32]   BN, Relu
//   ConvTranspose 64->3,    k4 s2 p1  -> [B,3,64,64]    Tanh
//
// The convolutions have no bias (batch norm follows each, and the paper's generator has none on the
// last layer either). Trainable parameters: 3,574,784 conv weights + 1,920 BN scales and shifts
// = 3,576,704; the 1,920 running means and variances are constants the graph reads too, so
// `kiln inspect` reports 3,578,624.
#include <array>

#include "frontend/ir/error.h"
#include "frontend/zoo/weights.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {
namespace {

constexpr int64_t kNoiseDim = 100;
constexpr int64_t kKernel = 4;

struct GeneratorLayer {
  int64_t in_channels, out_channels, stride, pad;
};

// ngf=64: channels halve while the image doubles, from 8*ngf at 4x4 to 3 colours at 64x64.
constexpr std::array<GeneratorLayer, 5> kLayers = {{
    {kNoiseDim, 512, 1, 0},
    {512, 256, 2, 1},
    {256, 128, 2, 1},
    {128, 64, 2, 1},
    {64, 3, 2, 1},
}};

}  // namespace

ModelBuilder build_dcgan(const ZooOptions& o) {
  if (o.batch < 1) throw Error("dcgan: --batch must be at least 1, got " + std::to_string(o.batch));
  WeightInit w(o.seed);
  ModelBuilder b("dcgan", 17);
  b.input("noise", DType::Float32, Shape{o.batch, kNoiseDim, 1, 1});
  std::string x = "noise";
  int64_t size = 1;
  // Variance of each layer's pre-activation, given unit-variance noise: He init makes it
  // 2 * E[x^2] of the layer input, which is 1 for the noise and 1/2 after BN (unit scale) + Relu.
  double expected_variance = 2.0;
  for (size_t i = 0; i < kLayers.size(); ++i) {
    const GeneratorLayer& l = kLayers[i];
    std::string p = "layer" + std::to_string(i + 1);
    // A transposed convolution's output pixel sums in_channels * (kernel/stride)^2 products (the whole
    // kernel once for the first layer, whose input is a single pixel): that is the fan-in He needs.
    int64_t taps = size == 1 ? 1 : (kKernel / l.stride) * (kKernel / l.stride);
    b.initializer(p + ".weight", w.he_uniform({l.in_channels, l.out_channels, kKernel, kKernel}, l.in_channels * taps));
    b.node("ConvTranspose", {x, p + ".weight"}, {p + ".deconv"})
        .attr("kernel_shape", std::vector<int64_t>{kKernel, kKernel})
        .attr("strides", std::vector<int64_t>{l.stride, l.stride})
        .attr("pads", std::vector<int64_t>{l.pad, l.pad, l.pad, l.pad});
    size = (size - 1) * l.stride + kKernel - 2 * l.pad;
    if (i + 1 == kLayers.size()) {
      b.node("Tanh", {p + ".deconv"}, {"image"});
      break;
    }
    // Batch-norm statistics near what the layer really produces, so normalised activations are
    // about unit scale: bounded, and every channel alive after the Relu.
    Shape c{l.out_channels};
    b.initializer(p + ".bn.scale", w.uniform_tensor(c, 0.8, 1.2));
    b.initializer(p + ".bn.bias", w.uniform_tensor(c, -0.1, 0.1));
    b.initializer(p + ".bn.mean", w.uniform_tensor(c, -0.1, 0.1));
    b.initializer(p + ".bn.var", w.uniform_tensor(c, 0.8 * expected_variance, 1.2 * expected_variance));
    b.node("BatchNormalization", {p + ".deconv", p + ".bn.scale", p + ".bn.bias", p + ".bn.mean", p + ".bn.var"},
           {p + ".bn"})
        .attr("epsilon", 1e-5);
    b.node("Relu", {p + ".bn"}, {p + ".relu"});
    x = p + ".relu";
    expected_variance = 1.0;
  }
  b.output("image", DType::Float32, Shape{o.batch, 3, size, size});
  return b;
}

}  // namespace kiln
