// lstm_kws: a keyword spotter in the shape of Hello Edge's LSTM models (Zhang et al. 2017): `seq`
// frames of 40 log-mel features, two stacked LSTMs of 128 units, the last step's state classified
// into 12 words by a Gemm and a Softmax. The recurrent layers are the model; they stand for the
// speech models (voice activity, keyword spotting, streaming encoders) embedded users deploy.
// Weights uniform in +-1/sqrt(hidden), PyTorch's LSTM initialisation.
#include <cmath>

#include "frontend/zoo/weights.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {

ModelBuilder build_lstm_kws(const ZooOptions& o) {
  constexpr int64_t kFeatures = 40, kHidden = 128, kWords = 12;
  WeightInit w(o.seed);
  const double bound = 1.0 / std::sqrt(static_cast<double>(kHidden));
  ModelBuilder b("lstm_kws", 17);
  b.input("features", DType::Float32, Shape{o.seq, o.batch, kFeatures});
  std::string x = "features";
  int64_t in = kFeatures;
  for (int layer = 1; layer <= 2; ++layer) {
    const std::string p = "lstm" + std::to_string(layer);
    b.initializer(p + ".W", w.uniform_tensor({1, 4 * kHidden, in}, -bound, bound));
    b.initializer(p + ".R", w.uniform_tensor({1, 4 * kHidden, kHidden}, -bound, bound));
    b.initializer(p + ".B", w.uniform_tensor({1, 8 * kHidden}, -bound, bound));
    // The first layer's every step feeds the second; of the second, only the last state is read.
    const std::string y = layer == 1 ? p + ".Y" : "";
    b.node("LSTM", {x, p + ".W", p + ".R", p + ".B"}, {y, p + ".Y_h"}, p).attr("hidden_size", kHidden);
    if (layer == 2) break;
    in = kHidden;
    x = p + ".frames";
    b.initializer(p + ".axis", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{1}));
    b.node("Squeeze", {p + ".Y", p + ".axis"}, {x});  // [seq, 1, batch, hidden] -> [seq, batch, hidden]
  }
  b.initializer("last.shape", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{o.batch, kHidden}));
  b.node("Reshape", {"lstm2.Y_h", "last.shape"}, {"last"});
  b.initializer("fc.weight", w.he_uniform({kWords, kHidden}, kHidden));
  b.initializer("fc.bias", w.uniform_tensor({kWords}, -0.1, 0.1));
  b.node("Gemm", {"last", "fc.weight", "fc.bias"}, {"logits"}).attr("transB", int64_t{1});
  b.node("Softmax", {"logits"}, {"probabilities"}).attr("axis", int64_t{-1});
  b.output("probabilities", DType::Float32, Shape{o.batch, kWords});
  return b;
}

}  // namespace kiln
