// The tuning table and its one-line form.
#include "toolchain/tune_progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

std::string clock_text(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--:--";
  const long t = std::lround(s);
  return fmt::format("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
}

std::string ms_text(double seconds) { return std::isfinite(seconds) ? fmt::format("{:.4f}", seconds * 1e3) : "-"; }

std::string gflops_text(double flops, double seconds) {
  return std::isfinite(seconds) && seconds > 0 ? fmt::format("{:.2f}", flops / seconds / 1e9) : "-";
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TuneProgress::TuneProgress(std::ostream& out, bool redraw, int trials_goal)
    : out_(out), redraw_(redraw), goal_(trials_goal) {}

std::string TuneProgress::table(const search::Tuner& tuner) {
  std::string s = fmt::format("{:>3}  {:<40} {:>6} {:>7} {:>11} {:>9} {:>6}  {}\n", "#", "task", "weight", "trials",
                              "best ms", "GFLOPS", "roof", "");
  for (size_t i = 0; i < tuner.tasks().size(); ++i) {
    const search::TuneTask& t = tuner.tasks()[i];
    const search::TaskProgress& p = tuner.scheduler().progress(static_cast<int>(i));
    const double best = tuner.best_cost(static_cast<int>(i));
    const double roof = tuner.roofline_s(static_cast<int>(i));
    // How near the task is to its roofline: 100% would be the device's peak or bandwidth.
    const std::string near = roof > 0 && std::isfinite(best) && best > 0 ? fmt::format("{:.0f}%", 100 * roof / best) : "-";
    std::string label = t.label.size() > 40 ? t.label.substr(0, 37) + "..." : t.label;
    s += fmt::format("{:>3}  {:<40} {:>6g} {:>7} {:>11} {:>9} {:>6}  {}\n", i, label, t.weight, p.trials, ms_text(best),
                     gflops_text(t.flops, best), near, p.dead ? "done: " + p.why_dead : "");
  }
  return s;
}

std::string TuneProgress::summary(const search::Tuner& tuner, int trials_goal, int trials_at_start, double elapsed_s) {
  const double objective = tuner.objective();
  const int done = tuner.trials() - trials_at_start;
  const int left = std::max(trials_goal - tuner.trials(), 0);
  const double eta = done > 0 ? elapsed_s / done * left : NAN;
  const std::string noisy =
      tuner.noisy_rounds() > 0 ? fmt::format(" | {} noisy round(s): the machine was loaded", tuner.noisy_rounds()) : "";
  return fmt::format("estimated latency {} ms | trials {}/{} | {:.2f} measured/s | elapsed {} | ETA {}{}\n",
                     ms_text(objective), tuner.trials(), trials_goal, done > 0 ? done / elapsed_s : 0.0,
                     clock_text(elapsed_s), clock_text(eta), noisy);
}

void TuneProgress::update(const search::Tuner& tuner, const search::RoundReport* round) {
  if (trials_at_start_ < 0) trials_at_start_ = tuner.trials();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string line = summary(tuner, goal_, trials_at_start_, elapsed);
  if (redraw_) {
    if (lines_drawn_ > 0) out_ << fmt::format("\x1b[{}A\x1b[J", lines_drawn_);
    const std::string text = table(tuner) + line;
    out_ << text << std::flush;
    lines_drawn_ = count_lines(text);
    return;
  }
  if (!round) {
    out_ << line << std::flush;
    return;
  }
  const search::TuneTask& t = tuner.tasks()[round->task];
  int failed = 0;
  std::string first_error;  // one example, so a round where everything fails says why
  for (const measure::MeasureResult& r : round->results) {
    if (r.error == measure::MeasureError::None) continue;
    if (failed++ == 0) first_error = fmt::format(" (first: {}: {})", measure::measure_error_name(r.error), r.error_msg);
  }
  if (first_error.size() > 160) first_error = first_error.substr(0, 157) + "...";
  const double best = tuner.best_cost(round->task);
  const std::string noisy =
      round->noisy ? fmt::format(", noisy (its reference ran {:.2f}x its best time)", round->reference_drift) : "";
  out_ << fmt::format("task {} ({}): {} {}, {} failed{}{}, best {} ms ({} GFLOPS) | {}", round->task, t.label,
                      round->results.size(), round->finalists ? "finalists re-measured" : "measured", failed,
                      first_error, noisy, ms_text(best), gflops_text(t.flops, best), line)
       << std::flush;
}

void TuneProgress::finish(const search::Tuner& tuner) {
  if (redraw_) {
    update(tuner, nullptr);
    return;
  }
  out_ << table(tuner) << std::flush;
}

}  // namespace kiln
