#include "frontend/passes/channel_constant.h"

namespace kiln {

std::optional<std::vector<double>> per_channel_values(const Tensor& c, size_t rank, int64_t channels) {
  if (static_cast<size_t>(c.rank()) > rank || !is_float(c.dtype())) return std::nullopt;
  const size_t lead = rank - static_cast<size_t>(c.rank());
  int64_t channel_extent = 1;
  for (size_t a = 0; a < static_cast<size_t>(c.rank()); ++a) {
    const int64_t e = c.shape()[a];
    if (lead + a == 1) channel_extent = e;
    else if (e != 1) return std::nullopt;
  }
  if (channel_extent != 1 && channel_extent != channels) return std::nullopt;
  std::vector<double> v(static_cast<size_t>(channels));
  for (int64_t m = 0; m < channels; ++m) v[m] = c.get_double(channel_extent == 1 ? 0 : m);
  return v;
}

}  // namespace kiln
