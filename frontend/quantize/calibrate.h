/// \file Calibration: the range each value of a float model takes over sample inputs, which
/// post-training quantization turns into scales and zero points (min-max calibration, ONNX Runtime's
/// default). The model runs in kiln's reference interpreter, so calibration needs no compiled code.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

struct ValueRange {
  double lo = 0.0, hi = 0.0;
};

/// The smallest and largest finite value of each of `names` over every sample. `g` is shape-inferred;
/// each sample holds its graph inputs by name. Throws Error when there are no samples.
std::map<std::string, ValueRange> calibrate(const Graph& g, const std::vector<std::string>& names,
                                            const std::vector<std::map<std::string, Tensor>>& samples);

}  // namespace kiln
