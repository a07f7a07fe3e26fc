/// \file The compiler's table of contents: every stage from a model file to a package, each one named
/// call whose result `--dump-after STAGE` prints (stage_dump.h). pipeline.cc reads top to bottom as:
///
///   import -> bind -> infer -> prune    frontend: a static-shape graph, everything constant folded
///   fold                                per-channel affine ops folded into the conv before them
///   subst                               TASO's verified graph substitutions, searched by cost (--subst)
///   layout                              convolutions in blocked layouts for the target's vectors
///   partition                           fusion into subgraphs, once: every later stage indexes them
///   tasks                               the distinct subgraphs, by workload key
///   schedule (analysis, sketch)         one program per task: default, random, or tuning records
///   lower                               the whole model as one loop-IR function
///   memory                              every intermediate's offset in the caller's workspace
///   codegen                             one LLVM module: kernels, weights, entry points
///   package                             lib<m>.a + <m>.h + <m>.json written to a directory
///
/// A CUDA target (or --schedule gpu-serial) keeps NCHW (no layout) and, after partition, lowers with the
/// default GPU schedule (scheduler/lower/lower_gpu.h); a CUDA target's codegen is PTX and a cubin
/// (backends/cuda) and its package calls the driver API (docs/cuda.md).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "backends/package/package.h"
#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/subst/optimizer.h"
#include "scheduler/tasks/task.h"
#include "toolchain/compile_target.h"
#include "toolchain/layout_target.h"
#include "toolchain/schedule_choice.h"
#include "toolchain/stage_dump.h"

namespace kiln {

namespace subst {
struct SearchResult;
}

struct PipelineOptions {
  ShapeBindings bindings;
  StageDump dump;  // which stages print their result (none by default)
  /// The last stage to run ("" : all of them). `kiln dump` stops after the last stage it prints.
  std::string stop_after;
  /// Search the verified graph substitutions (frontend/subst/optimizer.h) after fold; off by default
  /// until it has made every model of bench/ at least as fast (bench/RESULTS.md).
  bool substitutions = false;
  /// How much cheaper (a fraction) a rewritten graph must be to be kept (subst::SearchOptions).
  double subst_min_gain = subst::SearchOptions{}.min_gain;
  /// When set, what a graph costs to the substitution search (toolchain/subst_costs.h: tuning
  /// records); unset, its roofline (frontend/subst/graph_cost.h).
  std::function<double(const Graph&)> subst_costs;
  /// When set, called with the graph the substitution search started from and what it found
  /// (toolchain/subst_tasks.h replays each step of its log).
  std::function<void(const Graph& searched, const subst::SearchResult& found)> on_subst;
  /// Recurrent layers' steps as loops in the generated code (kiln.StepLoop, frontend/ir/step_loop.h);
  /// off, unrolled (GPU programs, which have no host-side loop yet).
  bool step_loops = true;
};

/// What the back half of the pipeline makes and for which target.
struct CompileOptions {
  CompileTarget target;
  std::string name = "model";  // the package's C prefix
  ScheduleChoice schedule;
  /// GPU programs (CUDA targets, gpu-serial): matmuls and convolutions as shared-memory block tiles
  /// (scheduler/lower/gpu_shared_tiles.h); off, one thread per output or register tile.
  bool gpu_shared_tiles = true;
  /// GPU programs: reductions with few outputs spread over several threads each (gpu_cross_thread.h).
  bool gpu_cross_thread_reductions = true;
  /// GPU programs: the default rule's shared tiles load their next chunk while the current one
  /// computes (gpu_shared_tiles.h; off until measured on a GPU).
  bool gpu_prefetch_chunks = false;
  /// `--max-sram`: a package needing more SRAM (arena + stack) is refused (package/memory_report.h).
  std::optional<int64_t> max_sram_bytes;
};

/// The frontend stages: import -> bind input shapes -> infer shapes (+ constant folding) -> remove dead nodes.
Graph load_model(const std::string& path, const PipelineOptions& opts);

/// The graph rewrites that compiling makes and the model as given does not have (so `kiln run` and
/// `kiln inspect` see the model itself): BatchNormalization and per-channel Mul/Add folded into
/// convolutions (fold), then convolutions and their neighbours in the blocked layout for the
/// target's vectors, and int8 convolutions as its dot products (layout). Every command that makes tasks for a target runs them, so
/// tuning, measuring and compiling see the same tasks.
Graph optimize_graph(const Graph& model, LayoutTarget target, const PipelineOptions& opts = {});

/// The layout stage alone: blocked convolutions and their neighbours, packed Gemm weights, dead nodes
/// removed, int8 convolutions as dot products where the target has them (what optimize_graph does
/// after subst).
void lay_out(Graph& g, LayoutTarget target);

/// lay_out on a graph and on its loops' bodies: optimize_graph's last stage.
void lay_out_model(Graph& g, LayoutTarget target);

/// The tuning tasks of a graph after the layout stage, as compile_graph makes them.
std::vector<Task> laid_out_tasks(const Graph& g);

/// The tuning tasks of a loaded model on a target: optimize_graph,
/// partition, tasks, as compile_graph makes them, so records of tune and measure apply to compile.
std::vector<Task> target_tasks(const Graph& model, LayoutTarget target, bool substitutions = false);

/// The stages from fold to package on a loaded graph; writes the package into `dir`. Returns
/// nullopt when opts.stop_after ends the pipeline before the package stage.
std::optional<package::PackageInfo> compile_graph(const Graph& model, const CompileOptions& c, const std::string& dir,
                                                  const PipelineOptions& opts = {});

/// Prints a graph as text: inputs, outputs, and one line per node with its output types; a node's
/// subgraphs (an If's branches) follow it, indented.
std::string print_graph(const Graph& g);

}  // namespace kiln
