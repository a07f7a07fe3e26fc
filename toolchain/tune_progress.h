/// \file What `kiln tune` shows while it runs: on a terminal a per-task table redrawn after every round
/// (trials, best latency, GFLOPS, weight) under the estimated end-to-end latency, elapsed time and ETA;
/// otherwise (a log file, CI) one plain line per round, so logs stay readable.
#pragma once
#include <chrono>
#include <ostream>
#include <string>

#include "scheduler/search/tuner.h"

namespace kiln {

class TuneProgress {
 public:
  /// `redraw`: a terminal (redraw the table in place) rather than a log.
  TuneProgress(std::ostream& out, bool redraw, int trials_goal);

  /// After each round (and once before the first, with round = nullptr).
  void update(const search::Tuner& tuner, const search::RoundReport* round);
  /// The final table, whatever the mode.
  void finish(const search::Tuner& tuner);

  /// The per-task table and the summary line, as update() draws them.
  static std::string table(const search::Tuner& tuner);
  static std::string summary(const search::Tuner& tuner, int trials_goal, int trials_at_start, double elapsed_s);

 private:
  std::ostream& out_;
  bool redraw_;
  int goal_;
  int lines_drawn_ = 0;
  int trials_at_start_ = -1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kiln
