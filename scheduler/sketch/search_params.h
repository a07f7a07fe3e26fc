/// \file What the sketch, init-population and mutation rules need to know of the target.
#pragma once
#include <cstdint>

namespace kiln::sketch {

struct SearchParams {
  int cores = 2;                      // parallel loops are fused up to cores x 16 iterations
  int vector_lanes = 16;              // float32 lanes: vectorized loops are fused up to this
  int64_t max_innermost_factor = 64;  // the innermost tile length is at most this
};

}  // namespace kiln::sketch
