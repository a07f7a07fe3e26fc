/// \file From tensor expressions to loop IR with the default schedule.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/lower/loop_ir.h"
#include "scheduler/te/compute.h"

namespace kiln::lower {

/// What the default schedule needs to know about the target.
struct ScheduleParams {
  int vector_bits = 512;  // 128 for NEON, 256 for AVX2, 512 for AVX-512
  int vector_registers = 32;  // 16 ymm on AVX2; 32 zmm on AVX-512, 32 q on NEON
  int64_t l2_bytes = int64_t{1} << 20;  // per core; register tiles keep their operand blocks within half of it
  /// Below this many output elements an elementwise stage runs serially, and a reduction below this
  /// many multiply-adds (outputs x reduction extent): a few microseconds of work, which a parallel_for
  /// dispatch and the other core's reads of the result cost as much as they save (bench/RESULTS.md,
  /// issue 17 step 8: MobileNet-V3 at 2 threads).
  int64_t min_parallel_elements = int64_t{1} << 16;
  int64_t min_parallel_work = int64_t{1} << 19;
  /// The largest plane of a padded input that a depthwise conv or a pool pads inside its own loop nest,
  /// into a local (stack) buffer (padded_planes.h): half of a 32 KiB L1, so the plane and the rows it
  /// feeds stay there, and a bound on what each thread's stack holds.
  int64_t local_plane_bytes = int64_t{16} << 10;
};

struct PaddedPlanePlan;  // padded_planes.h

/// The parameters of a target with `vector_bits`-wide vectors (x86 has 16 of 256 bits, 32 of 512).
ScheduleParams schedule_params_for(int vector_bits);

/// Epilogue fusion in the default schedule: elementwise stages that only finish a reduction (a conv's
/// bias, its activation, a residual Add) are computed on the reduction's accumulators as they are
/// stored, instead of as passes of their own over its result. `expr` is the chain's result in the
/// reduction's axes, with the variable `value` standing for the reduction's; `out` the chain's last
/// stage, which is stored.
struct Epilogue {
  te::TensorRef out;
  Expr value;
  Expr expr;
};
struct EpiloguePlan {
  std::map<size_t, Epilogue> by_stage;            // reduction stage index -> its epilogue
  std::set<const te::TensorNode*> computed_inside;  // tensors never stored: the reductions and chain members before the last
  std::set<const te::TensorNode*> chain_members;    // stages with no loop nest of their own (the last is stored by its reduction)
};
/// A reduction takes an elementwise stage as its epilogue when that stage is its only reader (and it
/// is no DAG output), has its shape and reads it at its own index; chains follow the same rule.
EpiloguePlan plan_epilogues(const te::ComputeDAG& dag);

/// The loop nest of one stage under the default schedule, a schedule that is already sane on a CPU:
/// the outermost spatial loop parallel, the innermost spatial loop vectorized (its tail in narrower
/// vectors, by codegen), and for reductions one accumulator per innermost-axis element kept in a local
/// buffer, with the reduction loops outside the vectorized loop so each step is a vector operation.
/// Tuned schedules (later issues) replace this through the same loop IR.
/// With `epilogue`, a reduction stores epilogue->expr into epilogue->out instead of its own result.
Stmt lower_stage_default(const te::TensorRef& stage_output,
                         const std::map<const te::TensorNode*, BufferRef>& buffers, const ScheduleParams& params,
                         const Epilogue* epilogue = nullptr);

/// Lowers a whole DAG into one function: parameters are the placeholders, then every stage's output
/// buffer (intermediates included; the package places them in the workspace), then the extern calls'
/// scratch buffers (also listed in `scratch`). Extern stages become calls of runtime kernels: one
/// call per node, at its first extern stage, writing every output of the node the DAG has (TopK's
/// values and indices). Ops without a runtime kernel raise Unsupported. The weights its reductions read
/// are stored in the order their tiles read them (constant_layout.h): those parameters come last, with
/// the flag buffer that has them filled on the first call.
LoweredFunc lower_dag(const te::ComputeDAG& dag, const std::string& name, const ScheduleParams& params);

/// The default schedule's statements for every stage of `dag`, in stage order: a loop nest per
/// computed stage (lower_stage_default; none for the stages `epilogues` stores from a reduction) and
/// one runtime-kernel call per extern node (lower_extern_stage). `epilogues` is plan_epilogues(dag);
/// `buffers` must hold every placeholder and every stage output it does not compute inside. Extern calls' scratch buffers are created
/// here and appended to `scratch`. The body of lower_dag and of a subgraph's default schedule
/// (lower_model.h), so both lower stages the same way.
/// `planes` is plan_padded_planes(dag, params): the pad stages it lists are padded inside their readers'
/// loop nests and need no buffer.
std::vector<Stmt> lower_stages_default(const te::ComputeDAG& dag, const EpiloguePlan& epilogues, const PaddedPlanePlan& planes,
                                       const std::map<const te::TensorNode*, BufferRef>& buffers, const ScheduleParams& params,
                                       std::vector<ScratchBuffer>& scratch);

/// The call of the runtime kernel that computes the extern stage `stage` of `dag`: one call per node, at
/// its first extern stage (`writer`, from writer_stages), writing every output of the node the DAG has
/// (TopK's values and indices); null for the node's later stages, which that call already wrote. A
/// kernel that needs scratch memory gets a new buffer, appended to `scratch` with `stage`. Any schedule
/// (default or tuned) lowers extern stages through this, since they have no loop nest to schedule.
Stmt lower_extern_stage(const te::ComputeDAG& dag, size_t stage, const std::vector<size_t>& writer,
                        const std::map<const te::TensorNode*, BufferRef>& buffers, std::vector<ScratchBuffer>& scratch);

/// For each of dag.tensors, the index of the stage whose code writes it: itself, or for an extern
/// stage the node's first extern stage, whose call writes all of them. A memory plan must treat a
/// tensor as live from there.
std::vector<size_t> writer_stages(const te::ComputeDAG& dag);

/// The outer axis a register tile also blocks (as GEMM kernels block N): an axis before the row axis
/// that some input is read along and another input, the one read along the row axis, is not; no input
/// is read along both. Conv's output channel is one: the weights follow it, the image follows the
/// output row. The innermost such axis, or none.
std::optional<size_t> operand_block_axis(const te::Stage& s);

/// The row-major flat index of `idx` in a tensor of `shape`.
Expr flat_index(const std::vector<Expr>& idx, const Shape& shape);
/// Its inverse: the row-major digits of `flat` over `shape` (0 for a dimension of extent 1; no
/// modulo on the outermost dimension that has more).
std::vector<Expr> row_major_digits(const Expr& flat, const Shape& shape);

/// One step of a reduction: acc + v, acc * v, min or max.
Expr combine_reduction(te::Reducer r, const Expr& acc, const Expr& v);

/// Rewrites multi-dimensional te loads into flat loads of `buffers` (row-major).
Expr flatten_loads(const Expr& e, const std::map<const te::TensorNode*, BufferRef>& buffers);

}  // namespace kiln::lower
