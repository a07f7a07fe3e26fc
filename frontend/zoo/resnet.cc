// ResNets as torchvision defines them, which is what the Ansor paper's ResNet-50 and ResNet-18 (and
// the 3D ResNet-18 of its video benchmark) are: convs without bias, each followed by inference-mode
// BatchNormalization; ResNet-50 is "v1.5" (the bottleneck downsamples in its 3x3 conv, not its first
// 1x1). r3d_18 is the same BasicBlock network with 3x3x3 convs, a (3,7,7) stem and no max pool.
#include "frontend/zoo/zoo_models.h"

#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

// torchvision's BasicBlock: conv3x3(stride) bn relu conv3x3 bn (+ shortcut) relu. The shortcut is a
// strided 1x1 conv + bn whenever the shape changes. `rank` is 2 for images, 3 for video clips.
FeatureMap basic_block(CnnBuilder& c, const FeatureMap& x, const std::string& p, int64_t planes, int64_t stride) {
  const size_t rank = x.spatial.size();
  FeatureMap y = c.conv(x, p + ".conv1", {planes, repeat(3, rank), repeat(stride, rank), repeat(1, rank)});
  y = c.relu(c.batch_norm(y, p + ".bn1"), p + ".relu1");
  y = c.conv(y, p + ".conv2", {planes, repeat(3, rank), {}, repeat(1, rank)});
  y = c.batch_norm(y, p + ".bn2", BnScale::ResidualBranchEnd);
  FeatureMap shortcut = x;
  if (stride != 1 || x.channels != planes) {
    shortcut = c.conv(x, p + ".downsample.0", {planes, repeat(1, rank), repeat(stride, rank), {}});
    shortcut = c.batch_norm(shortcut, p + ".downsample.1");
  }
  return c.relu(c.add(y, shortcut, p + ".add"), p + ".relu");
}

// How wide a bottleneck's 3x3 conv is and in how many groups: ResNet's (1 group of 64 per 64
// planes) or ResNeXt's (32 groups of 4, "32x4d").
struct Cardinality {
  int64_t groups = 1;
  int64_t width_per_group = 64;
};

// torchvision's Bottleneck (v1.5): 1x1 reduce, 3x3 with the stride (grouped in ResNeXt), 1x1 expand
// to 4x `planes`.
FeatureMap bottleneck(CnnBuilder& c, const FeatureMap& x, const std::string& p, int64_t planes, int64_t stride,
                      Cardinality card) {
  constexpr int64_t kExpansion = 4;
  const int64_t width = planes * card.width_per_group / 64 * card.groups;
  FeatureMap y = c.conv(x, p + ".conv1", {width, {1, 1}});
  y = c.relu(c.batch_norm(y, p + ".bn1"), p + ".relu1");
  y = c.conv(y, p + ".conv2", {width, {3, 3}, {stride, stride}, {1, 1}, card.groups});
  y = c.relu(c.batch_norm(y, p + ".bn2"), p + ".relu2");
  y = c.conv(y, p + ".conv3", {planes * kExpansion, {1, 1}});
  y = c.batch_norm(y, p + ".bn3", BnScale::ResidualBranchEnd);
  FeatureMap shortcut = x;
  if (stride != 1 || x.channels != planes * kExpansion) {
    shortcut = c.conv(x, p + ".downsample.0", {planes * kExpansion, {1, 1}, {stride, stride}, {}});
    shortcut = c.batch_norm(shortcut, p + ".downsample.1");
  }
  return c.relu(c.add(y, shortcut, p + ".add"), p + ".relu");
}

enum class Block { Basic, Bottleneck };

// The four stages: 64, 128, 256, 512 planes; every stage after the first halves the resolution
// (in time too, for video) in its first block.
FeatureMap resnet_stages(CnnBuilder& c, FeatureMap x, Block block, const std::vector<int>& blocks_per_stage,
                         Cardinality card = {}) {
  const int64_t planes[] = {64, 128, 256, 512};
  for (size_t stage = 0; stage < 4; ++stage)
    for (int i = 0; i < blocks_per_stage[stage]; ++i) {
      std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      x = block == Block::Basic ? basic_block(c, x, prefix, planes[stage], stride)
                                : bottleneck(c, x, prefix, planes[stage], stride, card);
    }
  return x;
}

ModelBuilder build_image_resnet(const std::string& name, const ZooOptions& o, Block block,
                                const std::vector<int>& blocks_per_stage, Cardinality card = {}) {
  WeightInit w(o.seed);
  ModelBuilder b(name, 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 224;
  FeatureMap x = c.input("image", o.batch, 3, {size, size});
  x = c.conv(x, "conv1", {64, {7, 7}, {2, 2}, {3, 3}});
  x = c.relu(c.batch_norm(x, "bn1"), "relu");
  x = c.max_pool(x, "maxpool", 3, 2, 1);
  x = resnet_stages(c, x, block, blocks_per_stage, card);
  c.classifier(x, "fc", 1000);
  return b;
}

}  // namespace

ModelBuilder build_resnet18(const ZooOptions& o) { return build_image_resnet("resnet18", o, Block::Basic, {2, 2, 2, 2}); }

ModelBuilder build_resnet50(const ZooOptions& o) {
  return build_image_resnet("resnet50", o, Block::Bottleneck, {3, 4, 6, 3});
}

// ResNeXt-50 32x4d (Xie et al. 2017): ResNet-50 whose bottlenecks are twice as wide and whose 3x3
// convs have 32 groups; TASO's ResNeXt benchmark.
ModelBuilder build_resnext50(const ZooOptions& o) {
  return build_image_resnet("resnext50", o, Block::Bottleneck, {3, 4, 6, 3}, {32, 4});
}

// Clips of 16 frames (the published setting); `size` sets H = W (default 112). Kinetics-400 classes.
ModelBuilder build_resnet3d18(const ZooOptions& o) {
  constexpr int64_t kFrames = 16;
  WeightInit w(o.seed);
  ModelBuilder b("resnet3d18", 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 112;
  FeatureMap x = c.input("clip", o.batch, 3, {kFrames, size, size});
  x = c.conv(x, "stem.0", {64, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}});
  x = c.relu(c.batch_norm(x, "stem.1"), "stem.2");
  x = resnet_stages(c, x, Block::Basic, {2, 2, 2, 2});
  c.classifier(x, "fc", 400);
  return b;
}

}  // namespace kiln
