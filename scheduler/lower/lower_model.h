/// \file A whole model as one loop-IR function, lowered subgraph by subgraph.
///
/// Tuning schedules each subgraph of a model (a task: frontend/partition + scheduler/tasks) on its own,
/// so the model is lowered the same way: every subgraph is its own compute DAG whose statement comes
/// from a pluggable scheduler (the default schedule here, a tuned one from the records later), and the
/// model owns one buffer per value that crosses subgraphs. The result says where every buffer lives
/// (input, weight, output or workspace, with a live range), which is all a memory plan and an entry
/// function need (backends/package).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"
#include "scheduler/lower/in_place_concat.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/loop_ir.h"
#include "scheduler/tasks/lower_subgraph.h"

namespace kiln::lower {

/// Lowers one subgraph: given its lowered DAG and `buffers` (pre-filled with the buffer of every
/// placeholder the DAG reads and of every subgraph output tensor), returns its statement. Buffers for
/// any other tensor it materializes (intermediate stages, extern calls' scratch) it creates itself and
/// appends to `temporaries`: workspace that is live during this subgraph only. Local buffers (Allocate)
/// are not temporaries. A Block's statements are spliced into the model's body, so each stays its own
/// function in codegen.
using SubgraphScheduler =
    std::function<Stmt(const LoweredSubgraph& sg, int subgraph_id, const std::map<const te::TensorNode*, BufferRef>& buffers,
                       std::vector<BufferRef>& temporaries)>;

/// Today's default schedule for a subgraph: every stage materialized (intermediates in `temporaries`),
/// lower_stage_default per stage, extern stages grouped into runtime-kernel calls (lower_stages_default,
/// as lower_dag does for a whole DAG). Returns a Block with one statement per stage.
Stmt lower_subgraph_default(const LoweredSubgraph& sg, int subgraph_id,
                            const std::map<const te::TensorNode*, BufferRef>& buffers,
                            std::vector<BufferRef>& temporaries, const ScheduleParams& params);

/// `buffers` plus a new buffer, appended to `temporaries`, for every stage of the subgraph that has
/// none yet and is not computed inside another (`epilogues`, or `local`: padded planes): what a
/// subgraph scheduler stores into.
std::map<const te::TensorNode*, BufferRef> with_stage_buffers(const LoweredSubgraph& sg, const EpiloguePlan& epilogues,
                                                              const std::map<const te::TensorNode*, BufferRef>& buffers,
                                                              std::vector<BufferRef>& temporaries,
                                                              const std::set<const te::TensorNode*>& local = {});

/// lower_subgraph_default with `params` bound: the scheduler a package uses when none is given.
SubgraphScheduler default_subgraph_scheduler(const ScheduleParams& params);

/// Where one parameter of the model's function lives at run time.
struct ModelParam {
  enum class Kind { Input, Weight, Output, Workspace };
  Kind kind = Kind::Workspace;
  int io_index = -1;                     // Input: index into Graph::inputs; Output: into Graph::outputs
  std::shared_ptr<const Tensor> weight;  // Weight: the constant's bytes
  int64_t bytes = 0;
  /// Workspace: the first and last position (index into SubgraphDAG::subgraphs) at which the buffer is
  /// live. A value crossing subgraphs lives from its producer to its last consumer; a temporary lives
  /// in its own subgraph only. (The final copies into outputs, at position subgraphs.size(), read no
  /// workspace.)
  int live_from = 0, live_to = 0;
  /// The first and last statement of func.body (a Block) that reads or writes the buffer: the same
  /// lifetime at the granularity of statements, which the memory plan uses. Under the default schedule
  /// a statement is one stage, so an intermediate stage's bytes are reused by the next stages of its
  /// subgraph instead of staying reserved for the whole subgraph. (A buffer no statement touches gets
  /// its subgraph's first statement.)
  int first_step = 0, last_step = 0;
  /// Workspace: when set, the buffer has no bytes of its own but is the run of `within`'s bytes that
  /// starts at `offset_within` (an input of an in-place Concat, in_place_concat.h). `within` may itself
  /// lie within another buffer.
  BufferRef within;
  int64_t offset_within = 0;
};

/// The model's function and what each of its parameters is.
struct ModelProgram {
  LoweredFunc func;                     // func.scratch is empty: scratch buffers are temporaries here
  std::vector<ModelParam> params;       // one per func.params, in that order
  std::vector<LoweredSubgraph> subgraphs;  // per SubgraphDAG::subgraphs, as the scheduler saw them
  /// Per statement of func.body: its step (what ModelParam::first_step counts), or -1 for a loop's
  /// statement, which spans a step per statement of its iteration.
  std::vector<int> statement_step;
  /// Per statement of func.body: the position in SubgraphDAG::subgraphs of the subgraph it belongs
  /// to, or -1 for the final copies into outputs.
  std::vector<int> statement_subgraph;
};

/// Lowers `g` subgraph by subgraph (lower_subgraph, in sdag's order), each with `schedule`, into one
/// function named `func_name` whose body is the scheduler's statements in order, then a copy loop into
/// each graph output no subgraph writes (an output that is a graph input or a constant, or a value
/// listed twice). Parameters: the graph inputs and constants some subgraph reads, the constants op
/// lowerings made (index and weight tables), every graph output, the values passed between subgraphs
/// (workspace), then each subgraph's temporaries. A subgraph output whose tensor is not a stage of its
/// own (an op passing its input or a constant through, or two outputs of one tensor) gets a copy stage,
/// so every output buffer is written by exactly one stage. The subgraphs of `in_place` (Concats,
/// plan_in_place_concats) get no statements: their inputs' buffers lie within their output's.
/// `order`, when given, is the order the subgraphs' statements run in (positions in sdag.subgraphs,
/// each after those it reads: scheduler/lower/memory_order.h picks one for memory); by default sdag's.
/// Throws Unsupported for an op without a lowering and Error when the scheduler breaks its contract.
ModelProgram lower_model(const Graph& g, const SubgraphDAG& sdag, const std::string& func_name,
                         const SubgraphScheduler& schedule, const std::vector<InPlaceConcat>& in_place = {},
                         const std::vector<int>& order = {});

/// The parameters (indices into p.params) that statement `statement` of p.func.body reads or writes.
std::set<size_t> params_touched(const ModelProgram& p, size_t statement);

/// One line per parameter ("input 0 x: 48 bytes", "workspace t: 64 bytes, live 1..2"), for tests and
/// dumps.
std::string print_model_params(const ModelProgram& p);

}  // namespace kiln::lower
