#include "frontend/zoo/zoo.h"

#include <functional>
#include <map>

#include "frontend/ir/error.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {
namespace {
const std::map<std::string, std::function<ModelBuilder(const ZooOptions&)>>& zoo() {
  static const std::map<std::string, std::function<ModelBuilder(const ZooOptions&)>> models = {
      {"tiny_cnn", build_tiny_cnn},
      {"resnet18", build_resnet18},
      {"resnet50", build_resnet50},
      {"resnext50", build_resnext50},
      {"inception_v3", build_inception_v3},
      {"nasnet_mobile", build_nasnet_mobile},
      {"repvgg_a0", build_repvgg_a0},
      {"mobileone_s0", build_mobileone_s0},
      {"resnet3d18", build_resnet3d18},
      {"mobilenet_v2", build_mobilenet_v2},
      {"matmul", build_matmul},
      {"qmatmul", build_qmatmul},
      {"dqmatmul", build_dqmatmul},
      {"requantize_edges", build_requantize_edges},
      {"batch_matmul", build_batch_matmul},
      {"conv2d", build_conv2d},
      {"depthwise", build_depthwise},
      {"conv_transpose2d", build_conv_transpose2d},
      {"maxpool2d", build_maxpool2d},
      {"dcgan", build_dcgan},
      {"bert_base", build_bert_base},
      {"blocked_edges", build_blocked_edges},
      {"lstm_kws", build_lstm_kws},
      {"ds_cnn_int8", build_ds_cnn_int8},
      {"ds_cnn_qdq", build_ds_cnn_qdq},
      {"gru_refine", build_gru_refine},
      {"detector_nms", build_detector_nms},
  };
  return models;
}
}  // namespace

std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : zoo()) names.push_back(name);
  return names;
}

ModelBuilder build_zoo_model(const std::string& name, const ZooOptions& opts) {
  auto it = zoo().find(name);
  if (it == zoo().end()) {
    std::string known;
    for (const auto& n : zoo_model_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown zoo model '" + name + "' (known: " + known + ")");
  }
  return it->second(opts);
}

}  // namespace kiln
