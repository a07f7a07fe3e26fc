// Inception-v3 as torchvision's Inception3 defines it (Szegedy et al., "Rethinking the Inception
// Architecture", 2015), at inference: no auxiliary classifier (torchvision runs it only in training),
// every conv a BasicConv2d (conv without bias, batch norm with eps 0.001, ReLU). Why it is in the
// zoo: its modules run several convs on one input side by side (three 1x1 convs in each of
// Mixed_5b..7c), the shape TASO's conv merging (issue 20) was made for. Names follow torchvision's
// state dict ("Mixed_5b.branch5x5_1.conv.weight").
#include "frontend/zoo/zoo_models.h"

#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

class Inception {
 public:
  explicit Inception(CnnBuilder& c) : c_(c) {}

  // BasicConv2d: conv (kernel kh x kw, stride, pads ph, pw) -> BN -> ReLU.
  FeatureMap conv(const FeatureMap& x, const std::string& name, int64_t out, int64_t kh, int64_t kw, int64_t stride = 1,
                  int64_t ph = 0, int64_t pw = 0) {
    FeatureMap y = c_.conv(x, name + ".conv", {out, {kh, kw}, {stride, stride}, {ph, pw}});
    return c_.relu(c_.batch_norm(y, name + ".bn"), name + ".relu");
  }
  FeatureMap conv1x1(const FeatureMap& x, const std::string& name, int64_t out) { return conv(x, name, out, 1, 1); }

  FeatureMap module_a(const FeatureMap& x, const std::string& p, int64_t pool_features) {
    FeatureMap b1 = conv1x1(x, p + ".branch1x1", 64);
    FeatureMap b5 = conv1x1(x, p + ".branch5x5_1", 48);
    b5 = conv(b5, p + ".branch5x5_2", 64, 5, 5, 1, 2, 2);
    FeatureMap b3 = conv1x1(x, p + ".branch3x3dbl_1", 64);
    b3 = conv(b3, p + ".branch3x3dbl_2", 96, 3, 3, 1, 1, 1);
    b3 = conv(b3, p + ".branch3x3dbl_3", 96, 3, 3, 1, 1, 1);
    FeatureMap bp = conv1x1(c_.avg_pool(x, p + ".avg_pool", 3, 1, 1), p + ".branch_pool", pool_features);
    return c_.concat({b1, b5, b3, bp}, p);
  }

  FeatureMap module_b(const FeatureMap& x, const std::string& p) {
    FeatureMap b3 = conv(x, p + ".branch3x3", 384, 3, 3, 2);
    FeatureMap bd = conv1x1(x, p + ".branch3x3dbl_1", 64);
    bd = conv(bd, p + ".branch3x3dbl_2", 96, 3, 3, 1, 1, 1);
    bd = conv(bd, p + ".branch3x3dbl_3", 96, 3, 3, 2);
    FeatureMap bp = c_.max_pool(x, p + ".max_pool", 3, 2, 0);
    return c_.concat({b3, bd, bp}, p);
  }

  FeatureMap module_c(const FeatureMap& x, const std::string& p, int64_t c7) {
    FeatureMap b1 = conv1x1(x, p + ".branch1x1", 192);
    FeatureMap b7 = conv1x1(x, p + ".branch7x7_1", c7);
    b7 = conv(b7, p + ".branch7x7_2", c7, 1, 7, 1, 0, 3);
    b7 = conv(b7, p + ".branch7x7_3", 192, 7, 1, 1, 3, 0);
    FeatureMap bd = conv1x1(x, p + ".branch7x7dbl_1", c7);
    bd = conv(bd, p + ".branch7x7dbl_2", c7, 7, 1, 1, 3, 0);
    bd = conv(bd, p + ".branch7x7dbl_3", c7, 1, 7, 1, 0, 3);
    bd = conv(bd, p + ".branch7x7dbl_4", c7, 7, 1, 1, 3, 0);
    bd = conv(bd, p + ".branch7x7dbl_5", 192, 1, 7, 1, 0, 3);
    FeatureMap bp = conv1x1(c_.avg_pool(x, p + ".avg_pool", 3, 1, 1), p + ".branch_pool", 192);
    return c_.concat({b1, b7, bd, bp}, p);
  }

  FeatureMap module_d(const FeatureMap& x, const std::string& p) {
    FeatureMap b3 = conv1x1(x, p + ".branch3x3_1", 192);
    b3 = conv(b3, p + ".branch3x3_2", 320, 3, 3, 2);
    FeatureMap b7 = conv1x1(x, p + ".branch7x7x3_1", 192);
    b7 = conv(b7, p + ".branch7x7x3_2", 192, 1, 7, 1, 0, 3);
    b7 = conv(b7, p + ".branch7x7x3_3", 192, 7, 1, 1, 3, 0);
    b7 = conv(b7, p + ".branch7x7x3_4", 192, 3, 3, 2);
    FeatureMap bp = c_.max_pool(x, p + ".max_pool", 3, 2, 0);
    return c_.concat({b3, b7, bp}, p);
  }

  FeatureMap module_e(const FeatureMap& x, const std::string& p) {
    FeatureMap b1 = conv1x1(x, p + ".branch1x1", 320);
    FeatureMap b3 = conv1x1(x, p + ".branch3x3_1", 384);
    FeatureMap b3a = conv(b3, p + ".branch3x3_2a", 384, 1, 3, 1, 0, 1);
    FeatureMap b3b = conv(b3, p + ".branch3x3_2b", 384, 3, 1, 1, 1, 0);
    FeatureMap bd = conv1x1(x, p + ".branch3x3dbl_1", 448);
    bd = conv(bd, p + ".branch3x3dbl_2", 384, 3, 3, 1, 1, 1);
    FeatureMap bda = conv(bd, p + ".branch3x3dbl_3a", 384, 1, 3, 1, 0, 1);
    FeatureMap bdb = conv(bd, p + ".branch3x3dbl_3b", 384, 3, 1, 1, 1, 0);
    FeatureMap bp = conv1x1(c_.avg_pool(x, p + ".avg_pool", 3, 1, 1), p + ".branch_pool", 192);
    return c_.concat({b1, c_.concat({b3a, b3b}, p + ".branch3x3"), c_.concat({bda, bdb}, p + ".branch3x3dbl"), bp}, p);
  }

 private:
  CnnBuilder& c_;
};

}  // namespace

// 299 x 299 images by default (the published resolution).
ModelBuilder build_inception_v3(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b("inception_v3", 17);
  CnnBuilder c(b, w);
  Inception net(c);
  const int64_t size = o.size > 0 ? o.size : 299;
  FeatureMap x = c.input("image", o.batch, 3, {size, size});
  x = net.conv(x, "Conv2d_1a_3x3", 32, 3, 3, 2);
  x = net.conv(x, "Conv2d_2a_3x3", 32, 3, 3);
  x = net.conv(x, "Conv2d_2b_3x3", 64, 3, 3, 1, 1, 1);
  x = c.max_pool(x, "maxpool1", 3, 2, 0);
  x = net.conv1x1(x, "Conv2d_3b_1x1", 80);
  x = net.conv(x, "Conv2d_4a_3x3", 192, 3, 3);
  x = c.max_pool(x, "maxpool2", 3, 2, 0);
  x = net.module_a(x, "Mixed_5b", 32);
  x = net.module_a(x, "Mixed_5c", 64);
  x = net.module_a(x, "Mixed_5d", 64);
  x = net.module_b(x, "Mixed_6a");
  x = net.module_c(x, "Mixed_6b", 128);
  x = net.module_c(x, "Mixed_6c", 160);
  x = net.module_c(x, "Mixed_6d", 160);
  x = net.module_c(x, "Mixed_6e", 192);
  x = net.module_d(x, "Mixed_7a");
  x = net.module_e(x, "Mixed_7b");
  x = net.module_e(x, "Mixed_7c");
  c.classifier(x, "fc", 1000);
  return b;
}

}  // namespace kiln
