#include "frontend/zoo/weights.h"

#include <cmath>

namespace kiln {

double WeightInit::uniform(double lo, double hi) {
  double unit = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * unit;
}

Tensor WeightInit::uniform_tensor(Shape shape, double lo, double hi) {
  Tensor t(DType::Float32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.set_double(i, uniform(lo, hi));
  return t;
}

Tensor WeightInit::he_uniform(Shape shape, int64_t fan_in) {
  double limit = std::sqrt(6.0 / static_cast<double>(fan_in));
  return uniform_tensor(std::move(shape), -limit, limit);
}

}  // namespace kiln
