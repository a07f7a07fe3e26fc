// The kiln driver: parses the command line and calls into the pipeline. Errors end here: one line on
// stderr and exit code 2.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "frontend/ir/error.h"
#include "toolchain/conformance.h"
#include "toolchain/exit_status.h"
#include "toolchain/inspect.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_model.h"
#include "toolchain/compile_target.h"
#include "toolchain/temp_dir.h"
#include "toolchain/targets_command.h"
#include "toolchain/schedule_check.h"
#include "toolchain/cli_bindings.h"
#include "toolchain/measure_command.h"
#include "toolchain/records_command.h"
#include "toolchain/quantize_command.h"
#include "toolchain/subst_command.h"
#include "toolchain/subst_costs.h"
#include "toolchain/rpc_commands.h"
#include "toolchain/tune_command.h"
#include <filesystem>
#include "frontend/zoo/zoo.h"

int main(int argc, char** argv) {
  kiln::report_llvm_fatal_errors();
  CLI::App app{"kiln: an ahead-of-time tensor compiler"};
  app.require_subcommand(1);

  std::string model_path;
  bool verbose = false;
  kiln::BindingArgs inspect_bindings;
  bool inspect_tasks = false;
  auto* inspect = app.add_subcommand("inspect", "Summarise a model: IO, ops, parameters, FLOPs");
  inspect->add_option("model", model_path, "ONNX model file")->required();
  inspect->add_flag("-v,--verbose", verbose, "Also list every node with its output shapes");
  inspect->add_flag("--tasks", inspect_tasks, "Also list the tuning tasks: fused subgraphs, deduplicated by workload key");
  inspect_bindings.add_to(inspect);

  std::string case_dir;
  kiln::ConformanceOptions conf;
  auto* conformance = app.add_subcommand("conformance", "Run ONNX test cases (model.onnx + test_data_set_*)");
  conformance->add_option("dir", case_dir, "A case directory or a directory of cases")->required();
  conformance->add_option("--engine", conf.engine, "Engine to check: reference, te (tensor expressions evaluated directly), compiled")->capture_default_str();
  conformance->add_option("--target", conf.target, "Target of the compiled engine")->capture_default_str();
  conformance->add_option("--rtol", conf.rtol, "Relative tolerance for floats")->capture_default_str();
  conformance->add_option("--atol", conf.atol, "Absolute tolerance for floats")->capture_default_str();
  conformance->add_option("--filter", conf.filter, "Only cases whose name matches this regex");
  conformance->add_option("--known-failures", conf.known_failures_file, "File of 'case reason' lines");
  conformance->add_option("--min-passed", conf.min_passed, "Exit non-zero when fewer cases pass");
  conformance->add_option("--freeze", conf.freeze, "Fix this graph input to its test-data value at compile time (repeatable)");
  std::string shard;
  conformance->add_option("--shard", shard, "K/N: only every N-th case, starting at the K-th (0-based)");
  conformance->add_flag("--subst", conf.substitutions, "Compiled engine: search the verified graph substitutions first");
  conformance->add_option("--subst-min-gain", conf.subst_min_gain,
                          "With --subst: the fraction by which a rewritten graph must be cheaper to be kept")
      ->check(CLI::Range(0.0, 1.0));
  conformance->add_flag("-v,--verbose", conf.verbose, "Print every case, with the reason for unsupported ones");
  std::string conf_schedule = "default";
  conformance->add_option("--schedule", conf_schedule,
                          "Compiled engine: default, random (a random program per task; with a CUDA target a random "
                          "shared-memory tile per matmul and conv), gpu-serial (the default GPU schedule run thread after "
                          "thread on this CPU target) or gpu-serial-random (random GPU tiles, run so)")->capture_default_str();
  conformance->add_flag("--compile-only", conf.compile_only,
                        "Compiled engine: build each package without running it (GPU targets where there is no GPU)");
  conformance->add_option("--seed", conf.schedule.seed, "Seed of --schedule random")->capture_default_str();
  conformance->add_option("--records", conf.schedule.records_path,
                          "Compiled engine: schedule each task with its best record in this tuning records file");

  std::string stage_names;
  for (const std::string& stage : kiln::pipeline_stages()) stage_names += (stage_names.empty() ? "" : " ") + stage;
  std::vector<std::string> dump_after;
  std::string dump_target = "host";
  kiln::BindingArgs dump_bindings;
  auto* dump = app.add_subcommand("dump", "Run the pipeline up to the given stages and print their results");
  dump->add_option("model", model_path, "ONNX model file")->required();
  dump->add_option("--dump-after", dump_after, "A stage, or all (repeatable). Stages: " + stage_names)->required();
  dump->add_option("--target", dump_target, "Target of the stages after partition")->capture_default_str();
  dump_bindings.add_to(dump);
  bool dump_subst = false;
  dump->add_flag("--subst", dump_subst, "Search the verified graph substitutions (the subst stage)");

  kiln::RunOptions run_opts;
  std::vector<std::string> run_inputs;
  kiln::BindingArgs run_bindings;
  auto* run = app.add_subcommand("run", "Evaluate a model on given or seeded inputs and print its outputs");
  run->add_option("model", model_path, "ONNX model file, or a compiled package directory")->required();
  run->add_option("--engine", run_opts.engine, "Engine: reference")->capture_default_str();
  run->add_option("--input", run_inputs, "name=file.pb|file.npy|values: a graph input from a TensorProto or NumPy file, or literal numbers (16000, 1,2,3) (repeatable)");
  run->add_option("--seed", run_opts.seed, "Seed for inputs not given as files")->capture_default_str();
  run->add_option("--print", run_opts.print_limit, "Values printed per output")->capture_default_str();
  run->add_option("--output-dir", run_opts.output_dir, "Also write outputs there as output_N.pb");
  run->add_option("--save-inputs", run_opts.inputs_dir, "Write the inputs used there as input_N.pb");
  run->add_option("--repeat", run_opts.repeat, "Package runs: timed repetitions, after one untimed warm-up run")->capture_default_str();
  run->add_option("--threads", run_opts.threads,
                  "Package runs: threads for the model's parallel_for (1: serial; >1: the package's pthread pool)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  run_bindings.add_to(run);

  std::string target_name;
  auto* targets = app.add_subcommand("targets", "List the targets, or print one target in full");
  targets->add_option("target", target_name, "A target name or a .toml file");

  std::string compile_target = "host", compile_out, compile_name;
  kiln::BindingArgs compile_bindings;
  auto* compile = app.add_subcommand("compile", "Compile a model into lib<name>.a + <name>.h + <name>.json");
  compile->add_option("model", model_path, "ONNX model file")->required();
  compile->add_option("--target", compile_target, "Target name")->capture_default_str();
  compile->add_option("-o,--output", compile_out, "Output directory")->required();
  compile->add_option("--name", compile_name, "C prefix of the package (default: the model file's name)");
  compile_bindings.add_to(compile);
  bool compile_subst = false;
  compile->add_flag("--subst", compile_subst,
                    "Search the verified graph substitutions (TASO) before layout, ranked by --records' latencies when given "
                    "(tune with --subst too for records that apply)");
  double compile_subst_min_gain = kiln::subst::SearchOptions{}.min_gain;
  compile->add_option("--subst-min-gain", compile_subst_min_gain,
                      "With --subst: the fraction by which the rewritten graph must be cheaper, by the estimate, to be kept")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  std::string compile_schedule = "default";
  kiln::ScheduleChoice compile_choice;
  compile->add_option("--schedule", compile_schedule, "default, random (a random program from each task's sketches; with a CUDA target a random shared-memory tile per matmul and conv), gpu-serial (the default GPU schedule, its threads run one after another on a CPU target) or gpu-serial-random (random GPU tiles, run so)")->capture_default_str();
  bool compile_no_shared_tiles = false;
  compile->add_flag("--no-shared-tiles", compile_no_shared_tiles,
                    "GPU programs: matmuls and convolutions without shared-memory block tiles (one thread per output or "
                    "register tile), to compare with");
  bool compile_no_cross_thread = false;
  compile->add_flag("--no-cross-thread-reductions", compile_no_cross_thread,
                    "GPU programs: reductions with few outputs one thread per output (to compare with)");
  bool compile_prefetch = false;
  compile->add_flag("--chunk-prefetch", compile_prefetch,
                    "GPU programs: the default rule's shared-memory tiles load each next chunk into registers during "
                    "the current one's FMAs (tuned tiles choose it themselves; to compare with)");
  int64_t compile_max_sram = -1;
  compile->add_option("--max-sram", compile_max_sram,
                      "Refuse a model whose SRAM need (arena + stack; the memory line says) is larger: bytes, or 256K, 1M")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::NonNegativeNumber);
  compile->add_option("--seed", compile_choice.seed, "Seed of --schedule random")->capture_default_str();
  compile->add_option("--records", compile_choice.records_path,
                      "Tuning records file: each task gets its best record for the target (others the default schedule)");
  std::vector<std::string> compile_dump_after;
  compile->add_option("--dump-after", compile_dump_after, "Print the result of a stage, or all (repeatable). Stages: " + stage_names);

  kiln::ScheduleCheckOptions check_opts;
  kiln::BindingArgs check_bindings;
  auto* check = app.add_subcommand("check-schedules",
                                   "Compile random programs of every task and compare them with the evaluator");
  check->add_option("model", model_path, "ONNX model file")->required();
  check->add_option("--programs", check_opts.programs, "Random programs per task")->capture_default_str();
  check->add_option("--seed", check_opts.seed, "Seed of the random choices")->capture_default_str();
  check->add_option("--cores", check_opts.params.cores, "Cores the parallel rule assumes")->capture_default_str();
  check->add_option("--vector-lanes", check_opts.params.vector_lanes, "Vector lanes the vectorize rule assumes")->capture_default_str();
  check->add_option("--records", check_opts.records,
                    "Check the schedules of this records file (failed ones included) instead of random programs");
  bool check_unoptimized = false;
  check->add_flag("--unoptimized", check_unoptimized, "Compile the programs without LLVM's optimizer (faster)");
  check_bindings.add_to(check);

  std::string zoo_name, zoo_out;
  kiln::ZooOptions zoo_opts;
  auto* zoo = app.add_subcommand("zoo", "Write a model from kiln's own model zoo as ONNX");
  zoo->add_option("name", zoo_name, "Model name")->required();
  zoo->add_option("-o,--output", zoo_out, "Output .onnx file")->required();
  zoo->add_option("--seed", zoo_opts.seed, "Weight seed")->capture_default_str();
  zoo->add_option("--batch", zoo_opts.batch, "Batch size")->capture_default_str();
  zoo->add_option("--size", zoo_opts.size, "Input height = width (0: the model's default)")->capture_default_str();
  zoo->add_option("--m", zoo_opts.m, "matmul: rows of A")->capture_default_str();
  zoo->add_option("--n", zoo_opts.n, "matmul: columns of B")->capture_default_str();
  zoo->add_option("--k", zoo_opts.k, "matmul: columns of A = rows of B")->capture_default_str();
  zoo->add_option("--in-channels", zoo_opts.in_channels, "conv2d/depthwise/maxpool2d: input channels (0: default)");
  zoo->add_option("--out-channels", zoo_opts.out_channels, "conv2d/depthwise: filters (0: default)");
  zoo->add_option("--group", zoo_opts.group, "conv2d: groups (a ResNeXt layer: --group 32)")->capture_default_str();
  zoo->add_option("--kernel", zoo_opts.kernel, "conv2d/depthwise/maxpool2d: kernel height = width")->capture_default_str();
  zoo->add_option("--stride", zoo_opts.stride, "conv2d/depthwise/maxpool2d: stride")->capture_default_str();
  zoo->add_option("--padding", zoo_opts.padding, "conv2d/depthwise/maxpool2d: padding on each side")->capture_default_str();
  zoo->add_option("--seq", zoo_opts.seq, "Sequence length (transformer models; frames for lstm_kws)")->capture_default_str();

  kiln::RpcCommands rpc_commands(app);
  kiln::MeasureCommand measure_command(app);
  kiln::TuneCommand tune_command(app);
  kiln::RecordsCommand records_command(app);
  kiln::SubstCommand subst_command(app);
  kiln::QuantizeCommand quantize_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    if (int rc = rpc_commands.run(); rc >= 0) return rc;
    if (int rc = measure_command.run(); rc >= 0) return rc;
    if (int rc = tune_command.run(); rc >= 0) return rc;
    if (int rc = records_command.run(); rc >= 0) return rc;
    if (int rc = subst_command.run(); rc >= 0) return rc;
    if (int rc = quantize_command.run(); rc >= 0) return rc;
    if (*inspect) {
      auto summary = kiln::summarize_model(model_path, inspect_bindings.parse(), inspect_tasks);
      std::cout << kiln::format_summary(summary, verbose);
      return 0;
    }
    if (*conformance) {
      if (!shard.empty()) {
        auto slash = shard.find('/');
        try {
          if (slash == std::string::npos) throw std::invalid_argument(shard);
          conf.shard_index = std::stoi(shard.substr(0, slash));
          conf.shard_count = std::stoi(shard.substr(slash + 1));
        } catch (const std::exception&) {
          throw kiln::Error("bad --shard '" + shard + "' (expected K/N, e.g. 0/3)");
        }
      }
      conf.schedule.kind = kiln::schedule_kind_of_flags(conf_schedule, conf.schedule.records_path);
      auto r = kiln::run_conformance(case_dir, conf, std::cout);
      if (r.passed < conf.min_passed) {
        std::cerr << "kiln: conformance: " << r.passed << " passed, fewer than --min-passed " << conf.min_passed << "\n";
        return 1;
      }
      return r.failed == 0 ? 0 : 1;
    }
    if (*run) {
      run_opts.bindings = run_bindings.parse();
      for (const auto& spec : run_inputs) {
        auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0) throw kiln::Error("bad --input '" + spec + "' (expected name=file.pb or name=value)");
        if (!run_opts.input_files.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second)
          throw kiln::Error("--input '" + spec.substr(0, eq) + "' is given twice");
      }
      kiln::run_model(model_path, run_opts, std::cout);
      return 0;
    }
    if (*targets) {
      std::cout << (target_name.empty() ? kiln::format_target_table() : kiln::format_target(kiln::load_target(target_name)));
      return 0;
    }
    if (*compile) {
      kiln::CompileOptions co;
      co.target = kiln::resolve_target(compile_target);
      co.name = compile_name.empty() ? kiln::package::c_identifier(std::filesystem::path(model_path).stem().string()) : compile_name;
      co.schedule = compile_choice;
      co.schedule.kind = kiln::schedule_kind_of_flags(compile_schedule, compile_choice.records_path);
      co.gpu_shared_tiles = !compile_no_shared_tiles;
      co.gpu_cross_thread_reductions = !compile_no_cross_thread;
      co.gpu_prefetch_chunks = compile_prefetch;
      if (compile_max_sram >= 0) co.max_sram_bytes = compile_max_sram;
      kiln::PipelineOptions po;
      po.bindings = compile_bindings.parse();
      po.dump = kiln::StageDump(compile_dump_after);
      po.substitutions = compile_subst;
      po.subst_min_gain = compile_subst_min_gain;
      if (compile_subst && !compile_choice.records_path.empty())  // the search ranks graphs by the records too
        po.subst_costs = kiln::record_graph_costs(kiln::measure::load_records(compile_choice.records_path), co.target.name,
                                                  co.target.vector_bits);
      kiln::Graph g = kiln::load_model(model_path, po);
      auto info = *kiln::compile_graph(g, co, compile_out, po);
      std::cout << "wrote " << compile_out << "/lib" << co.name << ".a, " << co.name << ".h, " << co.name
                << ".json (target " << co.target.name << ", workspace " << info.workspace_size << " bytes, lower bound "
                << info.workspace_lower_bound << ", weights " << info.weights_bytes << " bytes)\n";
      if (info.memory) std::cout << kiln::package::memory_report_text(*info.memory);
      return 0;
    }
    if (*check) {
      kiln::PipelineOptions po;
      po.bindings = check_bindings.parse();
      check_opts.optimize = !check_unoptimized;
      kiln::Graph g = kiln::load_model(model_path, po);
      int programs = 0, passed = 0, refused = 0, tasks = 0;
      kiln::check_model_schedules(g, check_opts, [&](const kiln::TaskScheduleCheck& t) {
        ++tasks;
        if (!t.skipped.empty()) {
          std::cout << "task " << t.key << " " << t.anchor << ": skipped (" << t.skipped << ")\n";
          return;
        }
        programs += t.programs;
        passed += t.passed;
        refused += t.refused;
        std::cout << "task " << t.key << " " << t.anchor << ": " << t.sketches << " sketches, " << t.passed << "/"
                  << t.programs - t.refused << " programs correct"
                  << (t.refused ? ", " + std::to_string(t.refused) + " refused by the bounds check" : "") << "\n";
        for (const auto& f : t.failures) std::cout << "  FAIL " << f << "\n";
        for (const auto& f : t.refusals) std::cout << "  REFUSED " << f << "\n";
        std::cout.flush();
      });
      std::cout << tasks << " tasks, " << passed << "/" << programs - refused << " programs correct"
                << (refused ? ", " + std::to_string(refused) + " refused by the bounds check" : "") << "\n";
      return passed == programs - refused ? 0 : 1;
    }
    if (*zoo) {
      kiln::build_zoo_model(zoo_name, zoo_opts).save(zoo_out);
      return 0;
    }
    if (*dump) {
      kiln::PipelineOptions po;
      po.bindings = dump_bindings.parse();
      po.dump = kiln::StageDump(dump_after);
      po.substitutions = dump_subst;
      po.stop_after = po.dump.last_wanted();
      kiln::Graph g = kiln::load_model(model_path, po);
      const auto& stages = kiln::pipeline_stages();
      if (std::find(stages.begin(), stages.end(), po.stop_after) > std::find(stages.begin(), stages.end(), "prune")) {
        kiln::CompileOptions co;
        co.target = kiln::resolve_target(dump_target);
        co.name = kiln::package::c_identifier(std::filesystem::path(model_path).stem().string());
        kiln::TempDir tmp("kiln-dump");
        kiln::compile_graph(g, co, tmp.path() + "/package", po);
      }
      return 0;
    }
  } catch (...) {
    return kiln::report_exception(std::current_exception(), std::cerr);
  }
  return 0;
}
