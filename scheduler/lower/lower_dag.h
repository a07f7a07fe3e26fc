/// \file From tensor expressions to loop IR with the default schedule.
#pragma once
#include <map>
#include <string>

#include "scheduler/lower/loop_ir.h"
#include "scheduler/te/compute.h"

namespace kiln::lower {

/// What the default schedule needs to know about the target.
struct ScheduleParams {
  int vector_bits = 512;  // 128 for NEON, 256 for AVX2, 512 for AVX-512
  /// Below this many output elements a stage runs serially: a parallel_for dispatch costs more.
  int64_t min_parallel_elements = 4096;
};

/// The loop nest of one stage under the default schedule, a schedule that is already sane on a CPU:
/// the outermost spatial loop parallel, the innermost spatial loop vectorized (with a scalar tail
/// in codegen), and for reductions one accumulator per innermost-axis element kept in a local
/// buffer, with the reduction loops outside the vectorized loop so each step is a vector operation.
/// Tuned schedules (later issues) replace this through the same loop IR.
Stmt lower_stage_default(const te::TensorRef& stage_output,
                         const std::map<const te::TensorNode*, BufferRef>& buffers, const ScheduleParams& params);

/// Lowers a whole DAG into one function: parameters are the placeholders, then every stage's output
/// buffer (intermediates included; the package places them in the workspace), then the extern calls'
/// scratch buffers (also listed in `scratch`). Extern stages become calls of runtime kernels: one
/// call per node, at its first extern stage, writing every output of the node the DAG has (TopK's
/// values and indices). Ops without a runtime kernel raise Unsupported.
LoweredFunc lower_dag(const te::ComputeDAG& dag, const std::string& name, const ScheduleParams& params);

/// For each of dag.tensors, the index of the stage whose code writes it: itself, or for an extern
/// stage the node's first extern stage, whose call writes all of them. A memory plan must treat a
/// tensor as live from there.
std::vector<size_t> writer_stages(const te::ComputeDAG& dag);

/// Rewrites multi-dimensional te loads into flat loads of `buffers` (row-major).
Expr flatten_loads(const Expr& e, const std::map<const te::TensorNode*, BufferRef>& buffers);

}  // namespace kiln::lower
