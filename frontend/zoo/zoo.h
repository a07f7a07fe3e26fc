/// \file The model zoo: ONNX models written by kiln's own code, for the demo, tests and benchmarks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/model_builder.h"

namespace kiln {

struct ZooOptions {
  uint64_t seed = 1;
  int64_t batch = 1;
  // CNNs and single-op models (resnet.cc, mobilenet_v2.cc, single_op.cc); size/channels 0 = model default.
  int64_t size = 0;  // input H = W
  int64_t m = 1024, n = 1024, k = 1024;
  int64_t in_channels = 0, out_channels = 0;
  int64_t group = 1;  // conv2d: groups (both channel counts must be multiples)
  int64_t kernel = 3, stride = 1, padding = 1;
  int64_t seq = 128;  // sequence length, for transformer models
};

/// Names `build_zoo_model` knows.
std::vector<std::string> zoo_model_names();
/// Builds a named model with seeded weights. Throws Error for an unknown name.
ModelBuilder build_zoo_model(const std::string& name, const ZooOptions& opts);

}  // namespace kiln
