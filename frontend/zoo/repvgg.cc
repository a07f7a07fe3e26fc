// RepVGG-A0 (Ding et al., CVPR 2021) in its training-time form, as the official code exports it
// before its `switch_to_deploy`: every block adds a 3x3 conv + BN, a 1x1 conv + BN and, where the
// shape allows, a BN of the input itself, then a ReLU. The deploy form folds the three branches
// into one 3x3 conv, which is a graph substitution (issue 20): conv is linear in its kernel and a
// 1x1 kernel zero-padded to 3x3 computes the same "same"-padded conv (docs/subst.md).
#include "frontend/zoo/zoo_models.h"

#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

// One RepVGG block: relu(bn(conv3x3(x)) + bn(conv1x1(x)) [+ bn(x)]), the identity branch only
// where the block keeps the channels and the resolution. The branches' order and names are the
// official code's (rbr_dense, rbr_1x1, rbr_identity).
FeatureMap repvgg_block(CnnBuilder& c, const FeatureMap& x, const std::string& p, int64_t channels, int64_t stride) {
  FeatureMap dense = c.conv(x, p + ".rbr_dense.conv", {channels, {3, 3}, {stride, stride}, {1, 1}});
  dense = c.batch_norm(dense, p + ".rbr_dense.bn");
  // The 1x1 and identity branches' norms start small, so that 22 blocks of three summed branches
  // keep the activations O(1) with seeded (untrained) weights.
  FeatureMap one = c.conv(x, p + ".rbr_1x1.conv", {channels, {1, 1}, {stride, stride}, {}});
  one = c.batch_norm(one, p + ".rbr_1x1.bn", BnScale::ResidualBranchEnd);
  FeatureMap sum = c.add(dense, one, p + ".add");
  if (stride == 1 && x.channels == channels)
    sum = c.add(sum, c.batch_norm(x, p + ".rbr_identity", BnScale::ResidualBranchEnd), p + ".add_identity");
  return c.relu(sum, p + ".nonlinearity");
}

}  // namespace

// RepVGG-A0: width multipliers a = 0.75, b = 2.5 (stages of 48, 48, 96, 192 and 1280 channels) and
// 1, 2, 4, 14, 1 blocks, each stage's first block at stride 2; global average pool and a 1000-way
// classifier.
ModelBuilder build_repvgg_a0(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b("repvgg_a0", 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 224;
  FeatureMap x = c.input("image", o.batch, 3, {size, size});
  const int64_t channels[] = {48, 48, 96, 192, 1280};
  const int blocks[] = {1, 2, 4, 14, 1};
  for (int stage = 0; stage < 5; ++stage)
    for (int i = 0; i < blocks[stage]; ++i)
      x = repvgg_block(c, x, "stage" + std::to_string(stage) + "." + std::to_string(i), channels[stage], i == 0 ? 2 : 1);
  c.classifier(x, "linear", 1000);
  return b;
}

}  // namespace kiln
