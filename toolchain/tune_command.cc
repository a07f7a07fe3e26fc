// `kiln tune`: models -> tasks -> (records restored) -> tuner rounds -> records, progress, curve.
#include "toolchain/tune_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "backends/measure/program_builder.h"
#include "backends/measure/records.h"
#include "backends/measure/sample_database.h"
#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "scheduler/search/tuner.h"
#include "scheduler/tasks/task.h"
#include "toolchain/gpu_tune.h"
#include "toolchain/pipeline.h"
#include "toolchain/subst_costs.h"
#include "toolchain/subst_tasks.h"
#include "toolchain/tune_progress.h"
#include "toolchain/tuning_curve.h"

namespace kiln {
namespace {

// Every task of the models, once per workload key; a task several models share weighs their
// occurrences together.
std::vector<search::TuneTask> model_tasks(const std::vector<std::string>& models, const ShapeBindings& bindings,
                                         LayoutTarget target, bool substitutions,
                                         const std::function<double(const Graph&)>& record_costs) {
  std::vector<search::TuneTask> out;
  std::map<std::string, size_t> index;
  for (const std::string& m : models) {
    PipelineOptions po;
    po.bindings = bindings;
    const Graph g = load_model(m, po);
    for (Task& t : substitutions ? subst_variant_tasks(g, target, record_costs) : target_tasks(g, target)) {
      auto [it, fresh] = index.emplace(t.key, out.size());
      if (!fresh) {
        out[it->second].weight += t.weight;
        continue;
      }
      std::string label = t.anchor + (t.node_names.empty() ? "" : " " + t.node_names.front());
      out.push_back({t.key, std::make_shared<const te::ComputeDAG>(std::move(t.dag)), static_cast<double>(t.weight),
                     t.flops, t.anchor, label});
    }
  }
  if (out.empty()) throw Error("tune: the model(s) have no tasks to tune");
  return out;
}

// Restores every record of `path` that belongs to one of the tasks on this target. Returns how many.
int restore_records(const std::string& path, const Target& target, search::Tuner& tuner) {
  if (!std::filesystem::exists(path)) return 0;
  std::map<std::string, int> task_of;
  for (size_t i = 0; i < tuner.tasks().size(); ++i) task_of[tuner.tasks()[i].key] = static_cast<int>(i);
  int restored = 0, unreplayable = 0;
  for (const measure::Record& r : measure::load_records(path)) {
    auto it = task_of.find(r.task_key);
    // A finalists' re-measurement times programs restored from their own records: no new trials.
    if (it == task_of.end() || r.target != target.name || r.final_batch != 0) continue;
    try {
      const auto& dag = tuner.tasks()[it->second].dag;
      tuner.restore(it->second, r.default_schedule ? state::State(dag) : measure::replay_record(r, dag), r.result,
                    r.default_schedule);
      ++restored;
    } catch (const Error&) {
      ++unreplayable;
    }
  }
  if (unreplayable > 0)
    std::cerr << fmt::format("kiln: warning: {}: {} record(s) do not replay on their task and were ignored\n", path,
                             unreplayable);
  return restored;
}

}  // namespace

TuneCommand::TuneCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("tune", "Tune the tasks of one or more models on a target, appending every measured "
                                    "program to a records file (resumes when the file exists)");
  cmd_->add_option("models", models_, "ONNX model(s); tasks they share are tuned once")->required();
  cmd_->add_option("--target", target_, "Target name or .toml path")->required();
  cmd_->add_option("--records", records_, "Records file (JSON lines, docs/records.md): appended to, resumed from")
      ->required();
  cmd_->add_option("--trials", trials_, "Programs to measure in all, records restored from --records included")
      ->capture_default_str();
  cmd_->add_option("--trials-per-task", trials_per_task_, "Instead of --trials: this many times the number of tasks");
  cmd_->add_option("--seed", seed_, "Seed of the search: the same seed on the same records proposes the same programs")
      ->capture_default_str();
  cmd_->add_option("--early-stopping", early_stopping_,
                   "Stop a task (and the tuning) after this many trials without improvement; <0 never")
      ->capture_default_str();
  cmd_->add_option("--threads", threads_, "Threads the measured programs' parallel loops use; 0: all cores (local) "
                                          "or the target's cores (rpc)")
      ->capture_default_str();
  cmd_->add_option("--measures-per-round", per_round_, "Programs measured per round")->capture_default_str();
  cmd_->add_option("--database", database_,
                   "Directory (searched recursively) or file of .features files that earlier tunes wrote beside "
                   "their records: the cost model trains on their programs before the first round");
  cmd_->add_option("--database-samples", database_samples_, "At most this many database samples, spread over its tasks")
      ->capture_default_str();
  cmd_->add_option("--peak-gflops", peak_gflops_,
                   "The device's FMA peak in GFLOPS for the threads the programs use (bench/native/fma_peak.c "
                   "measures one core): with it the table shows each task's distance to its roofline, and a task "
                   "within 90% of it stops");
  cmd_->add_option("--bandwidth-gbs", bandwidth_gbs_, "The device's memory bandwidth in GB/s, for the same roofline");
  cmd_->add_option("--finalists", finalists_,
                   "After tuning, time each task's N fastest programs again beside its default schedule, side by "
                   "side; compile --records then picks among these times (0: do not)")
      ->capture_default_str();
  cmd_->add_option("--population", population_, "Evolutionary search population")->capture_default_str();
  cmd_->add_option("--strategy", strategy_, "Task scheduler: gradient or round-robin")->capture_default_str();
  cmd_->add_option("--cost-model", cost_model_,
                   "What ranks unmeasured programs: xgboost (Ansor's model, trained on every round), or random (no "
                   "model: programs are measured as the search draws them; for comparing)")
      ->capture_default_str();
  cmd_->add_option("--build-timeout", build_timeout_s_, "Build time limit per program, seconds")->capture_default_str();
  cmd_->add_option("--device-wait", device_wait_s_,
                   "Seconds to wait for a lost device (every program of a round lost) before stopping; the "
                   "programs it lost are measured again, never counted or recorded as failures")
      ->capture_default_str();
  cmd_->add_option("--curve", curve_, "Where the tuning curve (SVG) goes; default: RECORDS.curve.svg");
  cmd_->add_flag("--plain", plain_, "Plain progress lines even on a terminal");
  cmd_->add_flag("--subst", substitutions_,
                 "Also tune the tasks the verified substitutions create: the model's tasks without them and after each "
                 "rewrite the search keeps, so `kiln compile --subst --records` can weigh each rewrite by measured latencies");
  bindings_.add_to(cmd_);
  // As TVM's tuning runners: one repeat of at least 100 ms (many calls of a fast program).
  runner_.repeat = 1;
  runner_.min_repeat_ms = 100;
  runner_.add_to(cmd_, "--input-seed");
}

int TuneCommand::run() {
  if (!*cmd_) return -1;
  if (trials_ <= 0 || trials_per_task_ < 0) throw Error("tune: --trials and --trials-per-task must be positive");
  if (per_round_ <= 0) throw Error("tune: --measures-per-round must be positive");
  if (finalists_ < 0) throw Error("tune: --finalists must be 0 or more");
  if (database_samples_ <= 0) throw Error("tune: --database-samples must be positive");
  if (!(device_wait_s_ >= 0) || !std::isfinite(device_wait_s_)) throw Error("tune: --device-wait must be 0 or more seconds");
  if (!(peak_gflops_ >= 0) || !(bandwidth_gbs_ >= 0) || !std::isfinite(peak_gflops_) || !std::isfinite(bandwidth_gbs_))
    throw Error("tune: --peak-gflops and --bandwidth-gbs must be positive numbers");
  search::TaskSchedulerOptions::Strategy strategy;
  if (strategy_ == "gradient") strategy = search::TaskSchedulerOptions::Strategy::Gradient;
  else if (strategy_ == "round-robin") strategy = search::TaskSchedulerOptions::Strategy::RoundRobin;
  else throw Error("tune: --strategy must be gradient or round-robin, not '" + strategy_ + "'");
  if (cost_model_ != "xgboost" && cost_model_ != "random")
    throw Error("tune: --cost-model must be xgboost or random, not '" + cost_model_ + "'");

  const Target target = load_target(target_);
  int threads = threads_;
  if (threads <= 0)
    threads = runner_.runner == "local" ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                                        : std::max(target.cores, 1);

  search::TunerOptions options;
  options.trials = trials_;
  options.measures_per_round = per_round_;
  options.seed = seed_;
  options.params.cores = threads;
  options.params.vector_lanes = std::max(target.vector_lanes(4), 1);
  options.search.population = population_;
  options.scheduler.strategy = strategy;
  options.scheduler.early_stopping = early_stopping_;
  options.peak_flops = peak_gflops_ * 1e9;
  options.bandwidth = bandwidth_gbs_ * 1e9;
  options.device_wait_s = device_wait_s_;
  options.on_note = [](const std::string& note) { std::cerr << note << "\n"; };

  measure::BuilderOptions bo;
  bo.timeout_s = build_timeout_s_;
  measure::ProgramBuilder builder(target, bo);
  search::XGBoostOptions xo;
  xo.seed = seed_;
  // A GPU is lent for minutes, so a GPU tune measures a few hundred programs: its model starts ranking
  // after 32 of them rather than the CPU search's 64.
  if (target.gpu) xo.warmup_samples = 32;
  search::XGBoostModel xgboost(xo);
  const std::unique_ptr<search::CostModel> random_model = search::make_random_model(seed_);
  search::CostModel& model = cost_model_ == "xgboost" ? static_cast<search::CostModel&>(xgboost) : *random_model;
  std::unique_ptr<measure::ProgramRunner> runner = runner_.make(target, builder, threads);
  if (target.gpu) {
    // GPU programs keep NCHW (no blocked layouts): the tasks of the graph kiln compile lowers for GPUs.
    // Options of the CPU search that the GPU tile search has no use for: refused, not ignored.
    for (const char* flag : {"--subst", "--population", "--strategy", "--early-stopping", "--database", "--finalists",
                             "--peak-gflops", "--bandwidth-gbs", "--curve", "--threads"})
      if (cmd_->count(flag) > 0)
        throw Error(fmt::format("tune: {} does not apply to CUDA target {} (its search is over GPU tiles: docs/cuda.md)",
                                flag, target.name));
    std::vector<search::TuneTask> tasks = model_tasks(models_, bindings_.parse(), 0, false, {});
    GpuTuneOptions go;
    go.trials = trials_per_task_ > 0 ? trials_per_task_ * static_cast<int>(tasks.size()) : trials_;
    go.per_round = per_round_;
    go.seed = seed_;
    if (cost_model_ == "xgboost") go.model = &model;
    std::cout << fmt::format("kiln tune: {} task(s) on {}, runner {}; {} trials, {} per round\n", tasks.size(),
                             target.name, runner_.runner, go.trials, go.per_round);
    tune_gpu(tasks, target, go, builder, *runner, records_, std::cout);
    std::cout << fmt::format("kiln tune: records {}\n", records_);
    return 0;
  }
  // With substitutions, the search ranked by the records tuned so far decides some of the tasks.
  std::function<double(const Graph&)> record_costs;
  if (substitutions_ && std::filesystem::exists(records_))
    record_costs = record_graph_costs(measure::load_records(records_), target.name, layout_target(target));
  std::vector<search::TuneTask> tasks =
      model_tasks(models_, bindings_.parse(), layout_target(target), substitutions_, record_costs);
  if (trials_per_task_ > 0) options.trials = trials_ = trials_per_task_ * static_cast<int>(tasks.size());
  search::Tuner tuner(std::move(tasks), options, model, builder, *runner);

  const int restored = restore_records(records_, target, tuner);
  std::cout << fmt::format("kiln tune: {} task(s) on {}, runner {}, {} thread(s); {} trials, {} per round{}\n",
                           tuner.tasks().size(), target.name, runner_.runner, threads, trials_, tuner.round_size(),
                           restored ? fmt::format(", {} restored from {}", restored, records_) : "");
  if (!database_.empty()) {
    std::set<std::string> own;
    for (const search::TuneTask& t : tuner.tasks()) own.insert(t.key);
    measure::SampleDatabase db =
        measure::load_sample_database(database_, target.name, own, static_cast<size_t>(database_samples_));
    std::cout << fmt::format("kiln tune: database {}: {} sample(s) of {} other task(s) from {} file(s) train the cost "
                             "model before the first round\n",
                             database_, db.samples.size(), db.tasks, db.files);
    tuner.pretrain(std::move(db.samples));
  }
  if (!tuner.budget_covers_every_task())
    std::cout << fmt::format("kiln tune: {} trials cannot measure each of the {} tasks once; the tasks left over keep "
                             "the default schedule (--trials-per-task 1 or more covers every task)\n",
                             trials_, tuner.tasks().size());
  TuneProgress progress(std::cout, isatty(STDOUT_FILENO) && !plain_, trials_);
  progress.update(tuner, nullptr);
  int64_t final_batch = 0;  // nonzero while the finalists are re-measured
  const auto record = [&](const search::RoundReport& round) {
    std::vector<std::string> lines, samples;
    for (size_t i = 0; i < round.inputs.size(); ++i) {
      lines.push_back(measure::record_line(round.inputs[i].task_key, target, round.inputs[i].state, round.results[i],
                                           round.inputs[i].default_schedule, final_batch, round.reference_drift));
      if (i < round.features.size() && !round.features[i].empty())
        samples.push_back(measure::sample_line(round.inputs[i].task_key, target.name, round.features[i],
                                               search::mean_cost(round.results[i])));
    }
    measure::append_record_lines(records_, lines);
    // For record databases (--database): after the records, so a kill between the two loses samples
    // only, never a record.
    if (!samples.empty()) measure::append_record_lines(measure::features_path(records_), samples);
    progress.update(tuner, &round);
  };
  tuner.tune(record);
  final_batch = static_cast<int64_t>(std::time(nullptr));
  tuner.remeasure_finalists(finalists_, record);
  progress.finish(tuner);
  if (tuner.noisy_rounds() > 0)
    std::cout << fmt::format("kiln tune: warning: in {} round(s) the reference program ran over {:.2f}x its best time: "
                             "the machine was loaded or throttled, and those rounds' times are not comparable{}\n",
                             tuner.noisy_rounds(), options.noise_threshold,
                             finalists_ > 0 ? "; the finalists were re-measured side by side" : "");

  const std::string curve = curve_.empty() ? records_ + ".curve.svg" : curve_;
  write_tuning_curve(curve, tuner.curve(), fmt::format("kiln tune on {}: {} task(s)", target.name, tuner.tasks().size()));
  const double objective = tuner.objective();
  std::cout << fmt::format("kiln tune: {} trials, estimated latency {} ms; records {}; curve {}\n", tuner.trials(),
                           std::isfinite(objective) ? fmt::format("{:.4f}", objective * 1e3) : "-", records_, curve);
  return 0;
}

}  // namespace kiln
