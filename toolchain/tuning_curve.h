/// \file The tuning curve `kiln tune` leaves beside its records: estimated end-to-end latency against
/// measured trials, as a standalone SVG (any browser shows it; no plotting library needed).
#pragma once
#include <string>
#include <vector>

#include "scheduler/search/tuner.h"

namespace kiln {

/// The SVG text of `points` (trials on x, milliseconds on y; points without an estimate, i.e. before
/// every task has a valid program, are left out). `title` heads the plot.
std::string tuning_curve_svg(const std::vector<search::CurvePoint>& points, const std::string& title);

/// Writes tuning_curve_svg to `path`; throws kiln::Error naming the path when it cannot.
void write_tuning_curve(const std::string& path, const std::vector<search::CurvePoint>& points,
                        const std::string& title);

}  // namespace kiln
