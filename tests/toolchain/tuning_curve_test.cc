// The tuning curve SVG: one polyline vertex per point with an estimate, in trial order, axes labelled,
// and a plain message instead of a line while no estimate exists.
#include "toolchain/tuning_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/ir/error.h"

namespace kiln {
namespace {

int vertices(const std::string& svg) {
  const size_t at = svg.find("<polyline");
  if (at == std::string::npos) return 0;
  const size_t from = svg.find("points=\"", at) + 8, to = svg.find('"', from);
  std::istringstream in(svg.substr(from, to - from));
  int n = 0;
  for (std::string xy; in >> xy;) ++n;
  return n;
}

TEST(TuningCurve, OneVertexPerEstimatedPointAndFallingLatencyGoesDown) {
  const double inf = INFINITY;
  std::vector<search::CurvePoint> pts = {{0, inf, 0}, {64, 0.004, 1}, {128, 0.002, 2}, {192, 0.001, 3}};
  const std::string svg = tuning_curve_svg(pts, "matmul <1024>");
  EXPECT_EQ(vertices(svg), 3);
  EXPECT_NE(svg.find("matmul &lt;1024&gt;"), std::string::npos);
  EXPECT_NE(svg.find("estimated latency (ms)"), std::string::npos);
  EXPECT_NE(svg.find("measured trials"), std::string::npos);
  // SVG's y grows downwards: a falling latency has growing y values along the line.
  const size_t from = svg.find("points=\"") + 8;
  std::istringstream in(svg.substr(from, svg.find('"', from) - from));
  double last_y = -1;
  for (std::string xy; in >> xy;) {
    const double y = std::stod(xy.substr(xy.find(',') + 1));
    EXPECT_GT(y, last_y);
    last_y = y;
  }
}

TEST(TuningCurve, NoEstimateYetSaysSo) {
  const std::string svg = tuning_curve_svg({{0, INFINITY, 0}}, "t");
  EXPECT_EQ(vertices(svg), 0);
  EXPECT_NE(svg.find("no estimate yet"), std::string::npos);
}

TEST(TuningCurve, UnwritablePathNamesIt) {
  try {
    write_tuning_curve("/nonexistent-dir/curve.svg", {}, "t");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/curve.svg"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
