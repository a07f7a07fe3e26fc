// MobileNetV2 (Sandler et al. 2018), width 1.0, as torchvision builds it: inverted residual blocks
// (1x1 expand -> 3x3 depthwise -> 1x1 linear projection), ReLU6 after every conv but the projection,
// convs without bias followed by inference-mode BatchNormalization.
#include "frontend/zoo/zoo_models.h"

#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

FeatureMap conv_bn_relu6(CnnBuilder& c, const FeatureMap& x, const std::string& p, const ConvSpec& spec) {
  FeatureMap y = c.conv(x, p + ".0", spec);
  return c.relu6(c.batch_norm(y, p + ".1"), p + ".2");
}

// The expansion conv is skipped when the expand ratio is 1 (the first block), as in the paper; the
// skip connection exists only where the block keeps the shape.
FeatureMap inverted_residual(CnnBuilder& c, const FeatureMap& x, const std::string& p, int64_t out_channels,
                             int64_t stride, int64_t expand_ratio) {
  const int64_t hidden = x.channels * expand_ratio;
  FeatureMap y = x;
  int layer = 0;
  auto next = [&] { return p + ".conv." + std::to_string(layer++); };
  if (expand_ratio != 1) y = conv_bn_relu6(c, y, next(), {hidden, {1, 1}});
  y = conv_bn_relu6(c, y, next(), {hidden, {3, 3}, {stride, stride}, {1, 1}, /*group=*/hidden});
  y = c.conv(y, next(), {out_channels, {1, 1}});
  const bool residual = stride == 1 && x.channels == out_channels;
  y = c.batch_norm(y, next(), residual ? BnScale::ResidualBranchEnd : BnScale::Unit);
  return residual ? c.add(x, y, p + ".add") : y;
}

}  // namespace

ModelBuilder build_mobilenet_v2(const ZooOptions& o) {
  struct Stage {
    int64_t expand_ratio, out_channels, blocks, stride;
  };
  // Table 2 of the paper (t, c, n, s).
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  WeightInit w(o.seed);
  ModelBuilder b("mobilenet_v2", 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 224;
  FeatureMap x = c.input("image", o.batch, 3, {size, size});
  int index = 0;
  x = conv_bn_relu6(c, x, "features." + std::to_string(index++), {32, {3, 3}, {2, 2}, {1, 1}});
  for (const Stage& s : stages)
    for (int64_t i = 0; i < s.blocks; ++i) {
      x = inverted_residual(c, x, "features." + std::to_string(index++), s.out_channels, i == 0 ? s.stride : 1,
                            s.expand_ratio);
    }
  x = conv_bn_relu6(c, x, "features." + std::to_string(index++), {1280, {1, 1}});
  c.classifier(x, "classifier.1", 1000);  // torchvision's classifier.0 is dropout: identity at inference
  return b;
}

}  // namespace kiln
