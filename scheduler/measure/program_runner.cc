// The wrong-answer comparison of program_runner.h.
#include "scheduler/measure/program_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

namespace kiln::measure {
namespace {

template <class T>
std::string compare_floats(const std::string& name, const std::vector<uint8_t>& got,
                           const std::vector<uint8_t>& want, const OutputTolerance& tol) {
  const size_t n = got.size() / sizeof(T);
  auto element = [](const std::vector<uint8_t>& bytes, size_t i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  };
  double squares = 0;
  size_t finite = 0;
  for (size_t i = 0; i < n; ++i)
    if (const double y = element(want, i); std::isfinite(y)) squares += y * y, ++finite;
  const double rms = finite ? std::sqrt(squares / static_cast<double>(finite)) : 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double x = element(got, i), y = element(want, i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;  // equal infinities
    if (std::isfinite(x) && std::isfinite(y) && std::fabs(x - y) <= tol.atol + tol.rtol * std::max(std::fabs(y), rms))
      continue;
    return fmt::format("output {} differs from the default schedule's at element {}: {} vs {}", name, i, x, y);
  }
  return "";
}

}  // namespace

std::string compare_output(const std::string& name, DType dtype, const std::vector<uint8_t>& got,
                           const std::vector<uint8_t>& want, const OutputTolerance& tol) {
  if (got.size() != want.size())
    return fmt::format("output {} has {} bytes, the default schedule's has {}", name, got.size(), want.size());
  if (dtype == DType::Float32) return compare_floats<float>(name, got, want, tol);
  if (dtype == DType::Float64) return compare_floats<double>(name, got, want, tol);
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return fmt::format("output {} differs from the default schedule's at byte {}", name, i);
  return "";
}

}  // namespace kiln::measure
