/// \file Constants that vary along the channel axis only: a per-output-channel scale or shift after a
/// convolution, which the fold and layout stages rewrite into weights, biases and blocked constants.
#pragma once
#include <optional>
#include <vector>

#include "frontend/ir/tensor.h"

namespace kiln {

/// The value for each of `channels` channels of float constant `c` broadcast against a rank-`rank`
/// tensor whose channels are axis 1, when `c` varies along that axis only (a scalar gives the same
/// value to all) and broadcasting it does not grow the tensor; nullopt otherwise.
std::optional<std::vector<double>> per_channel_values(const Tensor& c, size_t rank, int64_t channels);

}  // namespace kiln
