// An SVG line plot with linear axes and a handful of labelled ticks.
#include "toolchain/tuning_curve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "frontend/ir/error.h"

namespace kiln {
namespace {

constexpr double kWidth = 720, kHeight = 420, kLeft = 80, kRight = 20, kTop = 40, kBottom = 50;

// About five round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double span = hi - lo > 0 ? hi - lo : 1;
  const double raw = span / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string tuning_curve_svg(const std::vector<search::CurvePoint>& points, const std::string& title) {
  std::vector<std::pair<double, double>> xy;  // trials, ms
  for (const search::CurvePoint& p : points)
    if (std::isfinite(p.objective)) xy.emplace_back(p.trials, p.objective * 1e3);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escape(title));
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", kLeft,
                     kTop, pw, ph);
  if (xy.empty()) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no estimate yet: some task has no valid "
                       "program</text>\n</svg>\n",
                       kWidth / 2, kTop + ph / 2);
    return svg;
  }
  double x0 = 0, x1 = 1, y0 = 0, y1 = 0;
  for (auto [x, y] : xy) x1 = std::max(x1, x), y1 = std::max(y1, y);
  y1 = y1 > 0 ? y1 * 1.05 : 1;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };
  for (double t : ticks(x0, x1))
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0:.1f}\" "
                       "y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                       px(t), kTop, kTop + ph, kTop + ph + 16, t);
  for (double t : ticks(y0, y1))
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/><text x=\"{3}\" "
                       "y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                       kLeft, py(t), kLeft + pw, kLeft - 6, py(t) + 4, t);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">measured trials</text>\n", kLeft + pw / 2,
                     kHeight - 12);
  svg += fmt::format("<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">estimated "
                     "latency (ms)</text>\n",
                     kTop + ph / 2);
  std::string path;
  for (auto [x, y] : xy) path += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"" + path + "\"/>\n</svg>\n";
  return svg;
}

void write_tuning_curve(const std::string& path, const std::vector<search::CurvePoint>& points,
                        const std::string& title) {
  std::ofstream out(path, std::ios::trunc);
  out << tuning_curve_svg(points, title);
  out.close();
  if (!out) throw Error("tune: cannot write the tuning curve " + path);
}

}  // namespace kiln
