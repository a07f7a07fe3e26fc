// NASNet-A Mobile (4 @ 1056) as Zoph et al. publish it ("Learning Transferable Architectures for
// Scalable Image Recognition", 2018) and as the common PyTorch port (Cadene's pretrainedmodels,
// 5,289,978 parameters) defines it, at inference. Why it is in the zoo: its cells are the graphs
// TASO's search was measured on (issue 20): many small separable convs and pools on two inputs,
// combined pairwise by additions and concatenated. Names follow that port's state dict
// ("cell_0.comb_iter_0_left.separable_1.depthwise_conv2d.weight").
//
// Cells read the two previous cells' outputs. A normal cell keeps the spatial size and outputs six
// branches' worth of channels; a reduction cell halves it and outputs four. Where the TensorFlow
// original pads 'SAME' asymmetrically at stride 2, the port pads the top-left by one, runs the
// symmetric-padded op and drops the first row and column; so does this.
#include "frontend/zoo/zoo_models.h"

#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

class NasNet {
 public:
  explicit NasNet(CnnBuilder& c) : c_(c) {}

  // Depthwise k x k (stride, pad) then pointwise to `out` channels, no biases.
  FeatureMap separable(const FeatureMap& x, const std::string& p, int64_t out, int64_t k, int64_t stride, int64_t pad) {
    FeatureMap d = c_.conv(x, p + ".depthwise_conv2d", {x.channels, {k, k}, {stride, stride}, {pad, pad}, x.channels});
    return c_.conv(d, p + ".pointwise_conv2d", {out, {1, 1}});
  }

  // ReLU, separable (to `mid` channels), BN, ReLU, separable (stride 1, to `out`), BN. With
  // `shifted`, the first separable runs on the map padded at the top-left and drops its first row
  // and column (the port's 'specific' and reduction branches).
  FeatureMap branch(const FeatureMap& x, const std::string& p, int64_t mid, int64_t out, int64_t k, int64_t stride,
                    int64_t pad, bool shifted = false) {
    FeatureMap y = c_.relu(x, p + ".relu");
    if (shifted) y = c_.zero_pad(y, p + ".pad", 1, 0, 1, 0);
    y = separable(y, p + ".separable_1", mid, k, stride, pad);
    if (shifted) y = c_.crop_top_left(y, p + ".crop");
    y = c_.relu(c_.batch_norm(y, p + ".bn_sep_1"), p + ".relu1");
    return c_.batch_norm(separable(y, p + ".separable_2", out, k, 1, pad), p + ".bn_sep_2");
  }
  // A branch whose channels stay the same throughout.
  FeatureMap sep(const FeatureMap& x, const std::string& p, int64_t k, int64_t stride, bool shifted = false) {
    return branch(x, p, x.channels, x.channels, k, stride, k / 2, shifted);
  }

  // ReLU, 1x1 conv, BN: how a cell brings an input to its width.
  FeatureMap squeeze(const FeatureMap& x, const std::string& p, int64_t out) {
    FeatureMap y = c_.conv(c_.relu(x, p + ".relu"), p + ".conv", {out, {1, 1}});
    return c_.batch_norm(y, p + ".bn");
  }

  // A 3x3 pool at stride 2 on the map padded at the top-left, its first row and column dropped.
  FeatureMap shifted_pool(const FeatureMap& x, const std::string& p, bool max) {
    FeatureMap y = c_.zero_pad(x, p + ".pad", 1, 0, 1, 0);
    y = max ? c_.max_pool(y, p + ".pool", 3, 2, 1) : c_.avg_pool(y, p + ".pool", 3, 2, 1, false);
    return c_.crop_top_left(y, p + ".crop");
  }
  FeatureMap avg3(const FeatureMap& x, const std::string& name) { return c_.avg_pool(x, name, 3, 1, 1, false); }

  // Halves the previous map with two 1x1 convs on its even and odd pixels (`out` / 2 channels each),
  // concatenated and normalised: a reduction without losing every other pixel.
  FeatureMap factorized_reduction(const FeatureMap& x, const std::string& p, int64_t out, const std::string& bn) {
    FeatureMap r = c_.relu(x, p + ".relu");
    FeatureMap a = c_.conv(c_.avg_pool(r, p + ".path_1.avgpool", 1, 2, 0), p + ".path_1.conv", {out / 2, {1, 1}});
    FeatureMap s = c_.crop_top_left(c_.zero_pad(r, p + ".path_2.pad", 0, 1, 0, 1), p + ".path_2.crop");
    FeatureMap b = c_.conv(c_.avg_pool(s, p + ".path_2.avgpool", 1, 2, 0), p + ".path_2.conv", {out / 2, {1, 1}});
    return c_.batch_norm(c_.concat({a, b}, p + ".paths"), p + "." + bn);
  }

  FeatureMap stem0(const FeatureMap& x, int64_t f) {
    const std::string p = "cell_stem_0";
    FeatureMap x1 = squeeze(x, p + ".conv_1x1", f);
    FeatureMap c0 = c_.add(sep(x1, p + ".comb_iter_0_left", 5, 2), branch(x, p + ".comb_iter_0_right", f, f, 7, 2, 3),
                           p + ".comb_iter_0");
    FeatureMap c1 = c_.add(c_.max_pool(x1, p + ".comb_iter_1_left", 3, 2, 1), branch(x, p + ".comb_iter_1_right", f, f, 7, 2, 3),
                           p + ".comb_iter_1");
    FeatureMap c2 = c_.add(c_.avg_pool(x1, p + ".comb_iter_2_left", 3, 2, 1, false),
                           branch(x, p + ".comb_iter_2_right", f, f, 5, 2, 2), p + ".comb_iter_2");
    FeatureMap c3 = c_.add(avg3(c0, p + ".comb_iter_3_right"), c1, p + ".comb_iter_3");
    FeatureMap c4 = c_.add(sep(c0, p + ".comb_iter_4_left", 3, 1), c_.max_pool(x1, p + ".comb_iter_4_right", 3, 2, 1),
                           p + ".comb_iter_4");
    return c_.concat({c1, c2, c3, c4}, p);
  }

  // A reduction cell from its two inputs brought to `f` channels each (`left` the older one).
  FeatureMap reduction(const FeatureMap& left, const FeatureMap& right, const std::string& p) {
    FeatureMap c0 = c_.add(sep(right, p + ".comb_iter_0_left", 5, 2, true), sep(left, p + ".comb_iter_0_right", 7, 2, true),
                           p + ".comb_iter_0");
    FeatureMap c1 = c_.add(shifted_pool(right, p + ".comb_iter_1_left", true), sep(left, p + ".comb_iter_1_right", 7, 2, true),
                           p + ".comb_iter_1");
    FeatureMap c2 = c_.add(shifted_pool(right, p + ".comb_iter_2_left", false), sep(left, p + ".comb_iter_2_right", 5, 2, true),
                           p + ".comb_iter_2");
    FeatureMap c3 = c_.add(avg3(c0, p + ".comb_iter_3_right"), c1, p + ".comb_iter_3");
    FeatureMap c4 = c_.add(sep(c0, p + ".comb_iter_4_left", 3, 1, true), shifted_pool(right, p + ".comb_iter_4_right", true),
                           p + ".comb_iter_4");
    return c_.concat({c1, c2, c3, c4}, p);
  }

  FeatureMap stem1(const FeatureMap& conv0, const FeatureMap& stem_0, int64_t f) {
    const std::string p = "cell_stem_1";
    return reduction(factorized_reduction(conv0, p, f, "final_path_bn"), squeeze(stem_0, p + ".conv_1x1", f), p);
  }
  FeatureMap reduction_cell(const FeatureMap& x, const FeatureMap& prev, const std::string& p, int64_t f) {
    return reduction(squeeze(prev, p + ".conv_prev_1x1", f), squeeze(x, p + ".conv_1x1", f), p);
  }

  // A normal cell from its inputs at `f` channels each: `left` from the older input (through a
  // factorized reduction in the first cell after a reduction, whose older input is twice as large).
  FeatureMap normal(const FeatureMap& left, const FeatureMap& right, const std::string& p) {
    FeatureMap c0 = c_.add(sep(right, p + ".comb_iter_0_left", 5, 1), sep(left, p + ".comb_iter_0_right", 3, 1),
                           p + ".comb_iter_0");
    FeatureMap c1 = c_.add(sep(left, p + ".comb_iter_1_left", 5, 1), sep(left, p + ".comb_iter_1_right", 3, 1),
                           p + ".comb_iter_1");
    FeatureMap c2 = c_.add(avg3(right, p + ".comb_iter_2_left"), left, p + ".comb_iter_2");
    FeatureMap c3 = c_.add(avg3(left, p + ".comb_iter_3_left"), avg3(left, p + ".comb_iter_3_right"), p + ".comb_iter_3");
    FeatureMap c4 = c_.add(sep(right, p + ".comb_iter_4_left", 3, 1), right, p + ".comb_iter_4");
    return c_.concat({left, c0, c1, c2, c3, c4}, p);
  }
  FeatureMap first_cell(const FeatureMap& x, const FeatureMap& prev, const std::string& p, int64_t f) {
    return normal(factorized_reduction(prev, p, f, "final_path_bn"), squeeze(x, p + ".conv_1x1", f), p);
  }
  FeatureMap normal_cell(const FeatureMap& x, const FeatureMap& prev, const std::string& p, int64_t f) {
    return normal(squeeze(prev, p + ".conv_prev_1x1", f), squeeze(x, p + ".conv_1x1", f), p);
  }

 private:
  CnnBuilder& c_;
};

}  // namespace

// 224 x 224 images by default (the published resolution); 1056 penultimate filters, 44 per cell
// branch at the first scale.
ModelBuilder build_nasnet_mobile(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b("nasnet_mobile", 17);
  CnnBuilder c(b, w);
  NasNet net(c);
  const int64_t size = o.size > 0 ? o.size : 224;
  const int64_t f = 1056 / 24;
  FeatureMap x = c.input("image", o.batch, 3, {size, size});
  FeatureMap conv0 = c.batch_norm(c.conv(x, "conv0.conv", {32, {3, 3}, {2, 2}}), "conv0.bn");
  FeatureMap stem_0 = net.stem0(conv0, f / 4);
  FeatureMap stem_1 = net.stem1(conv0, stem_0, f / 2);
  // Three stacks of four cells (the first with a factorized reduction of its older input), each
  // after a reduction, at f, 2f and 4f channels a branch.
  FeatureMap prev = stem_0, cur = stem_1;
  int cell = 0;
  for (int64_t scale : {1, 2, 4}) {
    if (scale > 1) {
      FeatureMap r = net.reduction_cell(cur, prev, "reduction_cell_" + std::to_string(scale / 2 - 1), scale * f);
      prev = cur;
      cur = r;
    }
    for (int k = 0; k < 4; ++k) {
      const std::string name = "cell_" + std::to_string(cell++);
      FeatureMap next = k == 0 ? net.first_cell(cur, prev, name, scale * f) : net.normal_cell(cur, prev, name, scale * f);
      prev = cur;
      cur = next;
    }
    if (scale < 4) cell += 2;  // the port numbers the reduction cells' places: cell_4, 5, 10, 11 are skipped
  }
  c.classifier(c.relu(cur, "relu"), "last_linear", 1000);
  return b;
}

}  // namespace kiln
