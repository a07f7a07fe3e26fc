// MobileOne-S0 (Vasu et al., "MobileOne: An Improved One millisecond Mobile Backbone", CVPR 2023)
// in its training-time form, as Apple's code (ml-mobileone) exports it before
// `reparameterize_model`. Every block is a sum of over-parameterized branches: four k x k conv + BN
// branches, a 1x1 conv + BN branch where k > 1, and a BN of the input where the block keeps its
// shape. The stages alternate depthwise 3x3 blocks and pointwise 1x1 blocks. The deploy form is
// one conv per block: graph substitutions (issue 20) reach it by summing kernels, as for RepVGG,
// but here over depthwise kernels and a running sum of four branches (docs/subst.md).
#include "frontend/zoo/zoo_models.h"

#include <optional>

#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

constexpr int kConvBranches = 4;  // S0's over-parameterization factor

// One MobileOne block: relu(scale(x) + skip(x) + conv_0(x) + ... + conv_{n-1}(x)), in the order
// and with the names of the official forward pass (`out = scale_out + identity_out`, then
// `out += rbr_conv[i](x)`). Where the block has neither a 1x1 nor a skip branch, PyTorch adds the
// convs to a literal 0; an exporter's constant folding drops that Add, and so does this.
FeatureMap mobileone_block(CnnBuilder& c, const FeatureMap& x, const std::string& p, int64_t out, int64_t kernel,
                           int64_t stride, int64_t group, int branches) {
  const int64_t pad = kernel / 2;
  auto conv_bn = [&](const std::string& name, int64_t k, int64_t k_pad, BnScale scale) {
    FeatureMap y = c.conv(x, name + ".conv", {out, {k, k}, {stride, stride}, {k_pad, k_pad}, group});
    return c.batch_norm(y, name + ".bn", scale);
  };
  // The first branch carries the block's signal; the others start small, so that 21 blocks of
  // five or six summed branches keep the activations O(1) with seeded (untrained) weights.
  std::optional<FeatureMap> sum;
  auto accumulate = [&](const FeatureMap& branch, const std::string& name) {
    sum = sum ? c.add(*sum, branch, name) : branch;
  };
  if (kernel > 1) accumulate(conv_bn(p + ".rbr_scale", 1, 0, BnScale::ResidualBranchEnd), "");
  if (stride == 1 && x.channels == out)
    accumulate(c.batch_norm(x, p + ".rbr_skip", BnScale::ResidualBranchEnd), p + ".add_skip");
  for (int i = 0; i < branches; ++i)
    accumulate(conv_bn(p + ".rbr_conv." + std::to_string(i), kernel, pad, i == 0 ? BnScale::Unit : BnScale::ResidualBranchEnd),
               p + ".add_conv." + std::to_string(i));
  return c.relu(*sum, p + ".activation");
}

}  // namespace

// MobileOne-S0: width multipliers 0.75, 1, 1, 2 (stages of 48, 48, 128, 256 and 1024 channels),
// 2, 8, 10 and 1 blocks after the stem, each stage's first at stride 2; the stem is one block of a
// single 3x3 branch; global average pool and a 1000-way classifier.
ModelBuilder build_mobileone_s0(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b("mobileone_s0", 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 224;
  FeatureMap x = c.input("image", o.batch, 3, {size, size});
  x = mobileone_block(c, x, "stage0", 48, 3, 2, 1, 1);
  const int64_t channels[] = {48, 128, 256, 1024};
  const int blocks[] = {2, 8, 10, 1};
  for (int stage = 0; stage < 4; ++stage)
    for (int i = 0; i < blocks[stage]; ++i) {
      // nn.Sequential indices: the depthwise block of block i is 2i, its pointwise block 2i + 1.
      const std::string p = "stage" + std::to_string(stage + 1) + ".";
      const int64_t stride = i == 0 ? 2 : 1;
      x = mobileone_block(c, x, p + std::to_string(2 * i), x.channels, 3, stride, x.channels, kConvBranches);
      x = mobileone_block(c, x, p + std::to_string(2 * i + 1), channels[stage], 1, 1, 1, kConvBranches);
    }
  c.classifier(x, "linear", 1000);
  return b;
}

}  // namespace kiln
