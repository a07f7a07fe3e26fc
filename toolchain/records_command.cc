// `kiln records distill` and `kiln records show`: load_records -> best_records -> a file or a table.
#include "toolchain/records_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <iostream>
#include <map>

#include "backends/measure/records.h"
#include "frontend/ir/error.h"

namespace kiln {
namespace {

// Unix seconds as UTC "2024-06-10 06:13:20"; "-" for a record without a time.
std::string utc_time(double unix_s) {
  if (!(unix_s > 0)) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  if (!::gmtime_r(&t, &tm)) return "-";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// What `show` prints for one (task, target).
struct Summary {
  int records = 0, valid = 0;
  std::map<std::string, int> errors;  // by error name
  double best_s = -1;                 // < 0: no valid record
  double first = 0, last = 0;         // timestamps
};

std::string errors_text(const std::map<std::string, int>& errors) {
  std::string s;
  for (const auto& [name, n] : errors) s += (s.empty() ? "" : ", ") + fmt::format("{} {}", name, n);
  return s.empty() ? "-" : s;
}

void add(Summary& s, const measure::Record& r) {
  const bool first = s.records++ == 0;
  if (measure::is_valid_record(r)) {
    ++s.valid;
    const double c = measure::mean_cost(r);
    if (s.best_s < 0 || c < s.best_s) s.best_s = c;
  } else if (r.result.error != measure::MeasureError::None) {
    ++s.errors[measure::measure_error_name(r.result.error)];
  } else {
    ++s.errors["no-time"];  // error none but no finite cost: a writer's bug, worth seeing
  }
  const double t = r.result.timestamp;
  s.first = first ? t : std::min(s.first, t);
  s.last = first ? t : std::max(s.last, t);
}

void print_table(const std::vector<measure::Record>& records, std::ostream& out) {
  std::map<measure::RecordKey, Summary> rows;
  Summary total;
  for (const measure::Record& r : records) {
    add(rows[{r.task_key, r.target}], r);
    add(total, r);
  }
  size_t target_w = 6;
  for (const auto& [k, s] : rows) target_w = std::max(target_w, k.second.size());
  const std::string format = "{:<16}  {:<" + std::to_string(target_w) + "}  {:>7}  {:>5}  {:>12}  {:<19}  {:<19}  {}\n";
  out << fmt::format(fmt::runtime(format), "task", "target", "records", "valid", "best µs", "first (UTC)", "last (UTC)",
                     "errors");
  for (const auto& [k, s] : rows)
    out << fmt::format(fmt::runtime(format), k.first, k.second, s.records, s.valid,
                       s.best_s < 0 ? "-" : fmt::format("{:.3f}", s.best_s * 1e6), utc_time(s.first), utc_time(s.last),
                       errors_text(s.errors));
  std::map<std::string, int> tasks;
  for (const auto& [k, s] : rows) tasks[k.first] += s.valid > 0;
  const auto tuned = std::count_if(tasks.begin(), tasks.end(), [](const auto& t) { return t.second > 0; });
  out << fmt::format("total: {} records, {} valid, {} tasks ({} with a valid record), {} task/target pairs, errors: {}\n",
                     total.records, total.valid, tasks.size(), tuned, rows.size(), errors_text(total.errors));
}

}  // namespace

RecordsCommand::RecordsCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("records", "Tools for tuning records files (JSON lines, docs/records.md)");
  cmd_->require_subcommand(1);
  distill_ = cmd_->add_subcommand("distill", "Keep only the best valid record per (task, target)");
  distill_->add_option("records", distill_in_, "Records file to read")->required();
  distill_->add_option("-o,--output", distill_out_, "Records file to write (replaced atomically; may be the input)")
      ->required();
  show_ = cmd_->add_subcommand("show", "Print a summary per (task, target): records, errors, best latency, times");
  show_->add_option("records", show_in_, "Records file to read")->required();
}

int RecordsCommand::run() {
  if (!*cmd_) return -1;
  if (*distill_) {
    const std::vector<measure::Record> records = measure::load_records(distill_in_);
    const std::map<measure::RecordKey, measure::Record> best = measure::best_records(records);
    std::vector<std::string> lines;
    for (const auto& [k, r] : best) lines.push_back(measure::record_line(r));
    measure::write_record_lines(distill_out_, lines);
    std::cout << fmt::format("wrote {}: {} records (the best per task and target of {} read)\n", distill_out_,
                             best.size(), records.size());
    return 0;
  }
  print_table(measure::load_records(show_in_), std::cout);
  return 0;
}

}  // namespace kiln
