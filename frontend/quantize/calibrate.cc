#include "frontend/quantize/calibrate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"

namespace kiln {

std::map<std::string, ValueRange> calibrate(const Graph& g, const std::vector<std::string>& names,
                                            const std::vector<std::map<std::string, Tensor>>& samples) {
  if (samples.empty()) throw Error(g.source + ": calibration needs at least one sample input");
  // The values to measure become the graph's outputs: the interpreter returns exactly those.
  Graph probe = g;
  probe.outputs = names;
  probe.count_outputs.clear();
  std::map<std::string, ValueRange> ranges;
  constexpr double inf = std::numeric_limits<double>::infinity();
  for (const std::string& n : names) ranges[n] = {inf, -inf};
  for (const auto& sample : samples) {
    const std::vector<Tensor> values = run_reference(probe, sample);
    for (size_t i = 0; i < names.size(); ++i) {
      ValueRange& r = ranges[names[i]];
      const Tensor& t = values[i];
      for (int64_t k = 0; k < t.size(); ++k) {
        const double v = t.get_double(k);
        if (!std::isfinite(v)) continue;
        r.lo = std::min(r.lo, v);
        r.hi = std::max(r.hi, v);
      }
    }
  }
  for (auto& [name, r] : ranges)
    if (r.lo > r.hi) r = {0.0, 0.0};  // empty, or never finite
  return ranges;
}

}  // namespace kiln
