/// \file Seeded weight initialisation for zoo models.
#pragma once
#include <cstdint>
#include <random>

#include "frontend/ir/tensor.h"

namespace kiln {

/// Draws weights from a 64-bit Mersenne Twister, whose sequence the C++ standard fixes, and maps bits
/// to floats by hand (std's distributions differ between library implementations), so a seed gives
/// the same model bytes everywhere.
class WeightInit {
 public:
  explicit WeightInit(uint64_t seed) : rng_(seed) {}
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi);
  /// He-uniform for a layer with `fan_in` inputs: keeps activations' variance steady through ReLUs.
  Tensor he_uniform(Shape shape, int64_t fan_in);
  Tensor uniform_tensor(Shape shape, double lo, double hi);

 private:
  std::mt19937_64 rng_;
};

}  // namespace kiln
