// `kiln measure`: records -> replayed states -> builds -> runs -> a table.
#include "toolchain/measure_command.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>

#include "backends/measure/program_builder.h"
#include "backends/measure/records.h"
#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "scheduler/tasks/task.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

// A line of the records file and what it was decoded into.
struct LoadedRecord {
  int line = 0;
  measure::Record record;
};

// Reads every record. A line that is not JSON at all (cut short by a tuner killed mid-append, or
// garbled) is skipped with a warning: the rest of the log is still good. A JSON line that is not a
// record is a malformed file and fatal.
std::vector<LoadedRecord> read_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("measure: cannot read records file " + path);
  std::vector<LoadedRecord> out;
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!nlohmann::json::accept(text)) {
      std::cerr << fmt::format("kiln: warning: {}:{}: skipping a corrupt or truncated record line\n", path, n);
      continue;
    }
    try {
      out.push_back({n, measure::parse_record(text)});
    } catch (const Error& e) {
      throw Error(fmt::format("measure: {}:{}: {}", path, n, e.what()));
    }
  }
  return out;
}

}  // namespace

MeasureCommand::MeasureCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("measure",
                            "Re-measure the schedules of a tuning records file on a target and print a table. Records "
                            "carry only workload keys, so --model must name the model(s) whose tasks they belong to");
  cmd_->add_option("records", records_, "Records file (JSON lines, docs/records.md)")->required();
  cmd_->add_option("--target", target_, "Target name or .toml path")->required();
  cmd_->add_option("--model", models_, "ONNX model(s) whose tasks the records were tuned for (required: the "
                                       "records do not carry the task's computation)")
      ->required();
  runner_.add_to(cmd_);
}

int MeasureCommand::run() {
  if (!*cmd_) return -1;
  const Target target = load_target(target_);
  const std::vector<LoadedRecord> records = read_records(records_);

  std::map<std::string, Task> tasks;
  for (const std::string& m : models_) {
    for (Task& t : target_tasks(load_model(m, PipelineOptions{}), layout_target(target))) tasks.emplace(t.key, std::move(t));
  }
  std::map<std::string, std::shared_ptr<const te::ComputeDAG>> dags;
  std::vector<measure::MeasureInput> inputs;
  std::vector<const LoadedRecord*> of_input;
  std::vector<std::string> replay_errors;
  for (const LoadedRecord& lr : records) {
    auto t = tasks.find(lr.record.task_key);
    if (t == tasks.end())
      throw Error(fmt::format("measure: {}:{}: task {} is not among the tasks of the --model model(s)", records_,
                              lr.line, lr.record.task_key));
    auto& dag = dags[t->first];
    if (!dag) dag = std::make_shared<const te::ComputeDAG>(t->second.dag);
    try {
      inputs.push_back({t->first, dag, measure::replay_record(lr.record, dag)});
    } catch (const Error& e) {
      throw Error(fmt::format("measure: {}:{}: the steps do not replay: {}", records_, lr.line, e.what()));
    }
    of_input.push_back(&lr);
  }

  measure::ProgramBuilder builder(target);
  std::unique_ptr<measure::ProgramRunner> runner = runner_.make(target, builder, 1);
  const std::vector<measure::BuildResult> builds = builder.build(inputs);
  const std::vector<measure::MeasureResult> results = runner->run(inputs, builds);

  int failed = 0;
  std::cout << fmt::format("{:<5} {:<17} {:<16} {:>12} {:>12} {:>9}  {}\n", "line", "task", "anchor", "record ms",
                           "measured ms", "GFLOPS", "error");
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const measure::Record& rec = of_input[i]->record;
    const Task& task = tasks.at(rec.task_key);
    const measure::MeasureResult& r = results[i];
    const std::string recorded = rec.result.error == measure::MeasureError::None && !rec.result.costs.empty()
                                     ? fmt::format("{:.4f}", mean(rec.result.costs) * 1e3)
                                     : "-";
    std::string measured = "-", gflops = "-", error = measure::measure_error_name(r.error);
    if (r.error == measure::MeasureError::None) {
      const double s = mean(r.costs);
      measured = fmt::format("{:.4f}", s * 1e3);
      gflops = s > 0 ? fmt::format("{:.2f}", task.flops / s / 1e9) : "-";
    } else {
      ++failed;
      error += ": " + r.error_msg;
    }
    std::cout << fmt::format("{:<5} {:<17} {:<16} {:>12} {:>12} {:>9}  {}\n", of_input[i]->line, rec.task_key,
                             task.anchor, recorded, measured, gflops, error);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace kiln
