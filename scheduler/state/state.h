/// \file Ansor's loop state: the stages of a compute DAG, each with its loop nest (iterators), compute
/// location and annotations, plus the ordered list of transform steps that produced it from the DAG's
/// initial state. A State is what the tuner searches over; it lowers to loop IR (scheduler/lower/
/// lower_state.h) and it replays from its step list, which is also its record (docs/records.md).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ir/error.h"
#include "scheduler/te/compute.h"

namespace kiln::state {

/// A transform step whose preconditions do not hold (an iterator out of range, vectorizing a reduction
/// loop, inlining a reduction). The message names the stage and the iterator.
class ScheduleError : public Error {
 public:
  using Error::Error;
};

enum class IteratorKind { Spatial, Reduction, Mixed, Special };
/// The numbering follows TVM's IteratorAnnotation, so "AN" records read the same.
enum class IteratorAnnotation { None = 0, Unroll, Vectorize, Parallel, VThread, BlockX, ThreadX, BlockY, ThreadY,
                                BlockZ, ThreadZ, Tensorize };
enum class ComputeAtKind { Root, Inlined, Iter };
enum class StageKind { Placeholder, Compute, Extern };

const char* iterator_kind_name(IteratorKind k);
const char* annotation_name(IteratorAnnotation a);  // "parallel", "vectorize", "blockIdx.x", ...

/// A loop variable ever created for a stage: a root (an output axis or a reduction axis of the stage's
/// computation) or the result of a split or fuse. Extents are derived from the roots' extents through
/// the relations, so a changed root extent (bound inference) or split length replays consistently.
struct IterNode {
  std::string name;
  IteratorKind kind = IteratorKind::Spatial;
  int64_t extent = 0;  // -1 while it depends on a split length that is not chosen yet (a sketch)
};

/// How loop variables derive from one another. Split: `in` = {parent}, `out` = {outer, ..., inner};
/// parent = ((out0 * e1 + out1) * e2 + ...) where e_k are the extents of out_k. Fuse: `in` = the fused
/// loops (outer first), `out` = {fused}; fused = in0 * (e1 * e2 ...) + in1 * (e2 ...) + ...
struct IterRelation {
  enum Kind { Split, Fuse } kind = Split;
  std::vector<int> in, out;
  /// Split only: the lengths of out[1..] (inner_to_outer) or of out[0..n-1] (not inner_to_outer);
  /// the remaining part takes ceil(extent / product). nullopt = not chosen yet.
  std::vector<std::optional<int64_t>> lengths;
  bool inner_to_outer = true;
};

/// One loop of a stage's nest, outermost first.
struct Iterator {
  int node = 0;  // in Stage::nodes
  IteratorAnnotation annotation = IteratorAnnotation::None;
  int64_t auto_unroll_max_step = 0;  // the "auto_unroll_max_step" pragma: unroll inner loops up to this
};

/// Storage alignment of a stage's buffer: the stride of dimension `axis` is padded to factor*k + offset.
struct StorageAlign {
  int axis = 0;
  int64_t factor = 0, offset = 0;
};

struct Stage {
  StageKind kind = StageKind::Compute;
  /// The tensor this stage writes; loads in other stages refer to it by identity. For a stage that a
  /// cache or rfactor step created it is a new tensor; its `stage` field is not used (see `op`).
  te::TensorRef tensor;
  /// The computation (axes, reduction, body) as it is now: cache and rfactor steps rewrite it.
  std::shared_ptr<const te::Stage> op;
  std::string scope = "global";  // "local" for a cache-write stage, the scope named for cache-read
  ComputeAtKind compute_at = ComputeAtKind::Root;
  int attach_stage = -1;  // ComputeAtKind::Iter: the stage and the node of its loop we are computed in
  int attach_node = -1;
  std::vector<IterNode> nodes;  // roots first: op->axes then op->reduce_axes
  int num_roots = 0;
  std::vector<IterRelation> relations;
  std::vector<Iterator> iters;  // the loop nest, outermost first
  std::vector<StorageAlign> storage_align;
  /// Extents of the roots before bound inference (the op's own domain).
  std::vector<int64_t> root_domain;
  /// A constant placeholder stored in the layout of the loops that read it (steps/layout_rewrite_step.h).
  bool layout_rewrite = false;

  const std::string& name() const { return tensor->name; }
  const IterNode& node_of(int iter) const { return nodes[static_cast<size_t>(iters[static_cast<size_t>(iter)].node)]; }
  /// The position in `iters` of a node, or -1.
  int iter_of_node(int node) const;
};

class Step;
using StepRef = std::shared_ptr<const Step>;

/// The state data, shared between copies until one is modified (copy-on-write): search holds thousands.
struct StateData {
  std::shared_ptr<const te::ComputeDAG> dag;
  std::vector<Stage> stages;  // placeholders first, then computed stages in topological order (docs/records.md)
  std::vector<StepRef> steps;
};

class State {
 public:
  State() = default;
  /// The initial state of a DAG: every stage at root, one iterator per output axis then per reduction axis.
  explicit State(std::shared_ptr<const te::ComputeDAG> dag);

  const te::ComputeDAG& dag() const { return *data_->dag; }
  const std::shared_ptr<const te::ComputeDAG>& dag_ptr() const { return data_->dag; }
  const std::vector<Stage>& stages() const { return data_->stages; }
  const Stage& stage(int id) const;
  const std::vector<StepRef>& steps() const { return data_->steps; }
  bool valid() const { return data_ != nullptr; }

  /// Applies `step` (checking its preconditions) and appends it to the step list.
  void apply(const StepRef& step);
  /// The stage whose tensor has this name, or -1.
  int stage_id(const std::string& name) const;
  /// Whether some split length is still unchosen (a sketch, not yet a program).
  bool has_undefined_lengths() const;

  // For steps: mutable access (copies the shared data first when needed) and bookkeeping.
  Stage& mutable_stage(int id);
  std::vector<Stage>& mutable_stages();
  /// Inserts a stage at `pos`, renumbering later stages and every attachment that points at them.
  void insert_stage(int pos, Stage s);
  /// Recomputes every node's extent from the roots' extents and the split lengths.
  void propagate_extents();

 private:
  StateData& mut();
  std::shared_ptr<StateData> data_;
};

/// Recomputes a stage's node extents from its roots' extents and its split lengths.
void propagate_extents(Stage& st);

/// A stage's initial nest for `op` (roots = op axes then reduction axes, named after their variables).
Stage make_stage(te::TensorRef tensor, std::shared_ptr<const te::Stage> op);

/// Replays `steps` from the DAG's initial state. Throws ScheduleError naming the step that fails.
State replay(std::shared_ptr<const te::ComputeDAG> dag, const std::vector<StepRef>& steps);

/// The loop nest of every stage in TVM's style (`parallel i.0@j.0@ (0,64)` ... `C = ...`), attached stages
/// inside their targets, inlined stages omitted. Two states with the same print are the same program:
/// search deduplicates by it.
std::string print_state(const State& s);

/// The step list as schedule calls, one per line (`C.split(i, [16, 4])`), for humans and sketch tests.
std::string print_steps(const State& s);

}  // namespace kiln::state
