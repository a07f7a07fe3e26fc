#include "toolchain/pipeline.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "backends/cuda/cuda_module.h"
#include "backends/cuda/cuda_package.h"
#include "backends/package/memory_plan.h"
#include "backends/package/model_module.h"
#include "frontend/layout/block_layout.h"
#include "frontend/layout/int8_dot_layout.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/partition/step_loop_partition.h"
#include "frontend/passes/conv_transpose_to_conv.h"
#include "frontend/passes/expand_recurrent.h"
#include "frontend/passes/fold_into_conv.h"
#include "frontend/passes/drop_qdq_moves.h"
#include "frontend/passes/fuse_qdq.h"
#include "frontend/passes/gemm_weights.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/passes/step_loop_bodies.h"
#include "frontend/subst/optimizer.h"
#include "scheduler/lower/gpu_task.h"
#include "scheduler/lower/in_place_writes.h"
#include "scheduler/lower/memory_order.h"
#include "scheduler/lower/lower_gpu.h"
#include "scheduler/lower/lower_model.h"
#include "scheduler/tasks/task.h"
#include "toolchain/task_table.h"

namespace kiln {

namespace {

// After a stage: dump its result when asked, and say whether the pipeline goes on.
template <typename Printer>
bool after(const PipelineOptions& o, const std::string& stage, Printer&& print) {
  o.dump.dump(stage, print);
  return o.stop_after != stage;
}

// The package's files, and its header in full.
std::string print_package(const std::string& dir, const std::string& name) {
  std::string text;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) text += e.path().filename().string() + ": " + std::to_string(e.file_size()) + " bytes\n";
  std::ifstream header(std::filesystem::path(dir) / (name + ".h"));
  return text + "\n" + std::string(std::istreambuf_iterator<char>(header), {});
}

// The whole model under the default GPU schedule: one kernel per stage.
lower::ModelProgram lower_for_gpu(const Graph& g, const SubgraphDAG& sdag, const CompileOptions& c,
                                  const std::vector<lower::InPlaceConcat>& in_place, const ModelSchedule& schedule) {
  lower::GpuScheduleParams gp;
  if (c.target.gpu) gp = cuda::gpu_schedule_for(c.target.cores, *c.target.gpu);  // a CUDA target's cores: its SMs
  gp.shared_tiles = c.gpu_shared_tiles;
  gp.cross_thread_reductions = c.gpu_cross_thread_reductions;
  gp.prefetch_chunks = c.gpu_prefetch_chunks;
  if (c.schedule.kind == ScheduleChoice::Kind::Random || c.schedule.kind == ScheduleChoice::Kind::GpuSerialRandom)
    gp.random_tiles = c.schedule.seed;
  // Tuned tiles (--records): each task's recorded gpu_tile steps (the schedule stage kept only records
  // whose tiles this target's GPU takes).
  auto tiles_of_task = std::make_shared<std::map<std::string, lower::GpuStageTiles>>();
  for (const auto& [key, program] : schedule.program_of_task)
    if (program) (*tiles_of_task)[key] = lower::gpu_stage_tiles(*program, gp);
  if (!tiles_of_task->empty())
    gp.tuned = [tiles_of_task, task_of = schedule.task_of_subgraph](int id) -> const lower::GpuStageTiles* {
      if (id < 0 || static_cast<size_t>(id) >= task_of.size()) return nullptr;
      auto it = tiles_of_task->find(task_of[static_cast<size_t>(id)]);
      return it == tiles_of_task->end() ? nullptr : &it->second;
    };
  lower::ModelProgram program = lower::lower_model(g, sdag, c.name + "_kernel", lower::gpu_subgraph_scheduler(gp), in_place);
  program.func.body = lower::gpu_kernels_only(program.func.body, gp);
  return program;
}

// The codegen and package stages for a CUDA target: PTX and a cubin (backends/cuda/cuda_module.h),
// and a package whose host code launches the kernels through the driver API.
std::optional<package::PackageInfo> cuda_codegen_and_package(const lower::ModelProgram& program,
                                                             const package::ModelMemoryPlan& memory, const Graph& g,
                                                             const CompileOptions& c, const std::string& dir,
                                                             const PipelineOptions& o) {
  const cuda::CudaProgram code = cuda::generate_cuda_program(program.func, c.target.machine);
  if (!after(o, "codegen", [&] { return code.ptx; })) return std::nullopt;

  package::PackageInfo info =
      cuda::write_cuda_package(program, memory, package::model_io(g), code, {c.name, c.target.name, c.target.cc, g.source}, dir);
  after(o, "package", [&] { return print_package(dir, c.name); });
  return info;
}

}  // namespace

Graph load_model(const std::string& path, const PipelineOptions& o) {
  auto graph_text = [](const Graph& g) { return [&g] { return print_graph(g); }; };
  Graph g = import_onnx_file(path);
  after(o, "import", graph_text(g));
  bind_input_shapes(g, o.bindings);
  after(o, "bind", graph_text(g));
  infer_shapes(g);
  after(o, "infer", graph_text(g));
  remove_dead_nodes(g);
  after(o, "prune", graph_text(g));
  return g;
}

Graph optimize_graph(const Graph& model, LayoutTarget target, const PipelineOptions& o) {
  Graph g = model;  // values share their constants: a cheap copy
  fuse_qdq(g);  // before anything reads the float form: the quantized weights stay int8
  quantize_before_moves(g);
  drop_qdq_around_moves(g);
  remove_dead_nodes(g);
  after(o, "qdq", [&] { return print_graph(g); });
  expand_recurrent(g, {.roll_steps = o.step_loops});
  if (!o.step_loops) unroll_step_loops(g);  // the long Loops and Scans inference made StepLoops
  // A loop's body gets the same rewrites; a recurrent layer in it is unrolled (loops do not nest).
  rewrite_step_loop_bodies(g, [](Graph& body) { expand_recurrent(body); });
  after(o, "expand", [&] { return print_graph(g); });
  auto fold = [](Graph& x) {
    fold_into_conv(x);
    batch_norms_to_affine(x);
    remove_dead_nodes(x);  // the weights the folds replaced, the norms' statistics
  };
  fold(g);
  rewrite_step_loop_bodies(g, fold);
  after(o, "fold", [&] { return print_graph(g); });
  auto deconv = [](Graph& x) {
    conv_transpose_to_conv(x);
    remove_dead_nodes(x);  // the ConvTranspose weights
  };
  deconv(g);
  rewrite_step_loop_bodies(g, deconv);
  after(o, "deconv", [&] { return print_graph(g); });
  if (o.substitutions) {
    subst::SearchOptions so;
    so.cost = subst::roofline_for(target.vector_bits, 1);
    so.measured = o.subst_costs;
    so.min_gain = o.subst_min_gain;
    const subst::SearchResult r = subst::optimize_graph_substitutions(g, subst::default_rules(), so);
    if (o.on_subst) o.on_subst(g, r);
    g = r.graph;
    after(o, "subst", [&] { return subst::format_rewrites(r) + print_graph(g); });
  } else {
    after(o, "subst", [] { return std::string("substitutions off (--subst turns them on)\n"); });
  }
  lay_out_model(g, target);
  after(o, "layout", [&] { return print_graph(g); });
  return g;
}

void lay_out_model(Graph& g, LayoutTarget target) {
  lay_out(g, target);
  rewrite_step_loop_bodies(g, [&](Graph& body) { lay_out(body, target); });
}

LayoutTarget layout_target(int vector_bits, const std::string& triple, const std::string& features) {
  // int8 dot products on every x86-64 target: vpdpbusd with VNNI, else vpmaddwd and a horizontal
  // add, which measured faster than a multiply-add per channel with SSE2, AVX2 and AVX-512 alike
  // (bench/RESULTS.md). On AArch64 with +dotprod as sdot's signed bytes; without it NEON's
  // expansion ran 1.33x the instructions of the per-channel form on DS-CNN (bench/RESULTS.md), so
  // not there. On a Cortex-M with the DSP extension (M4, M7) as two SMLADs of byte pairs; the packed
  // copy of the input may add to the arena (DS-CNN's stayed at its lower bound: bench/RESULTS.md).
  if (triple.starts_with("aarch64")) {
    const bool sdot = has_feature(features, "+dotprod");
    return {vector_bits, sdot, sdot};
  }
  if (triple.starts_with("thumb") || triple.starts_with("arm")) return {vector_bits, has_feature(features, "+dsp")};
  return {vector_bits, triple.starts_with("x86_64")};
}

LayoutTarget layout_target(const Target& t) { return layout_target(t.vector_bits, t.triple, t.features); }

void lay_out(Graph& g, LayoutTarget target) {
  if (target.int8_dot)
    use_int8_dot_products(g, target.signed_dot, int8_output_block(target.vector_bits, target.signed_dot));
  block_layout(g, float_block_for(target.vector_bits));
  transpose_gemm_weights(g);  // also weights in the order the kernel reads them
  remove_dead_nodes(g);  // the NCHW values no reader needs any more, the weights replaced
}

std::vector<Task> laid_out_tasks(const Graph& g) {
  const SubgraphDAG sdag = partition_graph(g);
  return extract_tasks(g, sdag, lower::subgraphs_of(lower::plan_in_place_outputs(g, sdag)));
}

std::vector<Task> target_tasks(const Graph& model, LayoutTarget target, bool substitutions) {
  PipelineOptions o;
  o.substitutions = substitutions;
  return laid_out_tasks(optimize_graph(model, target, o));
}

std::optional<package::PackageInfo> compile_graph(const Graph& model, const CompileOptions& c, const std::string& dir,
                                                  const PipelineOptions& o) {
  package::check_package_name(c.name);
  if (c.target.is_cuda() && c.schedule.kind != ScheduleChoice::Kind::Default && c.schedule.kind != ScheduleChoice::Kind::Random &&
      c.schedule.kind != ScheduleChoice::Kind::Records)
    throw Unsupported("target " + c.target.name + ": CUDA targets compile with the default, a random or a tuned "
                      "(--records) GPU schedule");

  // GPU programs keep NCHW: blocked layouts exist for CPU vectors. Their random tiles are drawn in the
  // lower stage (lower_for_gpu), so the CPU schedule stage sees the default.
  const bool gpu_program = c.target.is_cuda() || c.schedule.kind == ScheduleChoice::Kind::GpuSerial ||
                           c.schedule.kind == ScheduleChoice::Kind::GpuSerialRandom;
  // A CUDA target's records name GPU tiles (gpu_tile steps), which the schedule stage reads as it
  // reads CPU programs.
  ScheduleChoice cpu_choice = c.schedule;
  if (gpu_program && !(c.target.is_cuda() && c.schedule.kind == ScheduleChoice::Kind::Records))
    cpu_choice.kind = ScheduleChoice::Kind::Default;
  PipelineOptions graph_options = o;
  graph_options.step_loops = o.step_loops && !gpu_program;
  const LayoutTarget layout = gpu_program ? LayoutTarget{} : layout_target(c.target.vector_bits, c.target.machine.triple, c.target.machine.features);
  const Graph g = optimize_graph(model, layout, graph_options);
  if (o.stop_after == "expand" || o.stop_after == "fold" || o.stop_after == "deconv" || o.stop_after == "subst" ||
      o.stop_after == "layout")
    return std::nullopt;

  const SubgraphDAG sdag = partition_graph(g);
  // A loop's body is partitioned on its own, its subgraphs numbered after the model's.
  auto print_partition = [&] {
    std::string text = print_subgraph_dag(g, sdag);
    for (const StepLoopPartition& p : partition_step_loops(g, sdag))
      text += "\nbody of " + p.node->label() + ", run " + std::to_string(p.loop.trip_count) + " times:\n" +
              print_subgraph_dag(*p.loop.body, p.body);
    return text;
  };
  if (!after(o, "partition", print_partition)) return std::nullopt;
  if (gpu_program)
    for (const Subgraph& sg : sdag.subgraphs)
      if (!sg.guards.empty())
        throw Unsupported(g.source + ": subgraph " + std::to_string(sg.id) + " runs " + guards_str(sg.guards) +
                          ": an If decided at run time is not compiled for GPUs yet");

  // A Concat's inputs are computed straight into its output where they can be.
  const std::vector<lower::InPlaceConcat> in_place = lower::plan_in_place_outputs(g, sdag);
  const std::vector<Task> tasks = extract_tasks(g, sdag, lower::subgraphs_of(in_place));
  if (!after(o, "tasks", [&] { return format_task_table(sdag, tasks); })) return std::nullopt;

  // Prints "analysis", "sketch" and "schedule" per task itself.
  const size_t subgraph_ids = subgraph_id_count(sdag, partition_step_loops(g, sdag));  // loop bodies' too
  auto schedule = std::make_shared<ModelSchedule>(choose_schedules(tasks, subgraph_ids, cpu_choice, c.target, o.dump));
  if (o.stop_after == "analysis" || o.stop_after == "sketch" || o.stop_after == "schedule") return std::nullopt;

  // A CUDA target's program, or with GpuSerial the same program on this CPU, each kernel's threads one
  // after another.
  auto lower_in = [&](const std::vector<int>& order) {
    return gpu_program ? lower_for_gpu(g, sdag, c, in_place, *schedule)
                       : lower::lower_model(g, sdag, c.name + "_kernel", subgraph_scheduler(schedule), in_place, order);
  };
  lower::ModelProgram program = lower_in({});
  // An output may take the bytes of an input that dies where it is written (CPU programs: a GPU's
  // workspace is not what limits it).
  auto plan = [&](const lower::ModelProgram& p) {
    return package::plan_model_memory(p, gpu_program ? std::vector<lower::InPlaceWrite>{} : lower::find_in_place_writes(p));
  };
  package::ModelMemoryPlan memory = plan(program);
  // Under a limit, the subgraphs run in the order that needs the smallest arena (memory_order.h), when
  // the program lowered in it plans smaller.
  if (c.max_sram_bytes && !gpu_program) {
    const lower::MemoryOrder order = lower::order_for_memory(program, sdag, package::kWorkspaceAlign);
    if (!order.order.empty() && order.peak < order.peak_given) {
      lower::ModelProgram reordered = lower_in(order.order);
      package::ModelMemoryPlan reordered_memory = plan(reordered);
      if (reordered_memory.size < memory.size) {
        reordered_memory.size_in_given_order = memory.size;
        program = std::move(reordered);
        memory = std::move(reordered_memory);
      }
    }
  }
  if (!after(o, "lower", [&] { return lower::print_func(program.func, true) + "\n" + lower::print_model_params(program); }))
    return std::nullopt;
  if (!after(o, "memory", [&] { return package::print_model_memory_plan(program, memory); })) return std::nullopt;
  if (c.target.is_cuda()) return cuda_codegen_and_package(program, memory, g, c, dir, o);

  package::ModelModule module =
      package::generate_model_module(program, memory, package::model_io(g), {c.name, c.target.machine, c.target.vector_bits, c.target.huge_page_bytes});
  if (!after(o, "codegen", [&] { return package::print_model_module(module); })) return std::nullopt;

  const std::string schedule_source = c.schedule.kind == ScheduleChoice::Kind::Default ? "default" : "custom";
  package::PackageInfo info = package::write_package(
      module, {c.target.name, c.target.file.empty() ? "" : std::filesystem::absolute(c.target.file).string(), c.target.cc,
               g.source, schedule_source, c.target.bare_metal, c.max_sram_bytes}, dir);
  after(o, "package", [&] { return print_package(dir, c.name); });
  return info;
}

namespace {

// The nodes and outputs of `g` at `depth` (two spaces a level); a node's subgraphs (an If's branches)
// follow it, a level deeper. A name is typed by the innermost graph that has it ("?" when none does:
// a value inference has not reached, or one a subgraph reads from outside).
void print_nodes(std::ostringstream& os, const Graph& g, int depth, std::vector<const Graph*> scopes) {
  scopes.push_back(&g);
  auto type_of = [&](const std::string& name) {
    for (auto s = scopes.rbegin(); s != scopes.rend(); ++s)
      if ((*s)->has_value(name)) {
        const Value& v = (*s)->value(name);
        if (!v.typed) return std::string("?");
        return dtype_name(v.dtype) + "[" + shape_str(v.shape) + "]" + (v.constant ? " const" : "");
      }
    return std::string("?");
  };
  const std::string pad(static_cast<size_t>(depth) * 2, ' ');
  for (const auto& in : g.inputs) os << pad << "input  " << in << ": " << type_of(in) << "\n";
  for (const Node& n : g.nodes) {
    os << pad;
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << (n.outputs[i].empty() ? "_" : n.outputs[i]);
    os << " = " << n.op_type << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << (n.inputs[i].empty() ? "_" : n.inputs[i]);
    os << ")  # " << n.name;
    for (const auto& out : n.outputs)
      if (!out.empty()) os << " " << type_of(out);
    if (!n.guards.empty()) os << "  [" << guards_str(n.guards) << "]";
    os << "\n";
    for (const auto& [key, value] : n.attrs)
      if (const auto* sub = std::get_if<SubgraphAttr>(&value); sub && sub->graph) {
        os << pad << "  " << key << ":\n";
        print_nodes(os, *sub->graph, depth + 2, scopes);
      }
  }
  for (const auto& out : g.outputs) os << pad << "output " << out << ": " << type_of(out) << "\n";
}

}  // namespace

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  os << "graph " << g.name << "\n";
  print_nodes(os, g, 1, {});
  return os.str();
}

}  // namespace kiln
