/// \file Per-stage facts about a compute DAG that the sketch and init-population rules decide by
/// (DESIGN.md §4): how a stage reads its inputs, whether it may be inlined, whether it is worth
/// multi-level tiling, who reads whom, and how many loops a producer can share with a consumer.
///
/// Definitions (Ansor's access-analysis facts, made precise for kiln's expressions):
/// - A *read* is one Load in a stage's body or init; its *indices* are the Load's args.
/// - *Simple access*: every index of every read is exactly one of the stage's spatial axis
///   variables or an integer constant. Transposes, broadcasts and elementwise reads qualify; any
///   arithmetic on an index (padding offsets, strides, reshapes' div/mod, gathers) or a reduce axis
///   in an index does not. Extern stages are never simple.
/// - *Expensive* ops are the ones that become a polynomial or series evaluation in generated code:
///   Exp, Log, Tanh, Erf, Sigmoid, Pow and the trigonometric and hyperbolic families. Sqrt, Div and
///   FMod are not counted: they are single instructions or cheap next to those (Ansor itself only
///   looks for exp). Inlining an expensive stage into a consumer that reads it at several points, or
///   inside a reduction, would repeat the expensive op there.
/// - *Inlineable*: any stage that is neither a reduction nor extern (what compute-inline accepts,
///   apart from the output check the step makes itself).
/// - *Strictly inlineable*: inlineable, simple access and no expensive op. Like Ansor, this is a
///   fact about the stage's computation only: a DAG output can be strictly inlineable, and the
///   always-inline rule must also ask `!is_output` (should_always_inline does both).
/// - *Inlines into its reader*: inlineable and simple access, not an output, and read by exactly
///   one stage, once, at exactly that stage's axes, by a stage that is neither a reduction nor
///   extern, over the same shape. Inlined, each of its values is still computed once, so an
///   expensive op costs nothing more; kept, it is a store and a load of a whole tensor. This is
///   where kiln departs from Ansor, whose always-inline rule keeps every stage with an exp: the
///   sigmoid of SiLU (x * sigmoid(x), after every conv of YOLOX) or the erf of GELU then stays a
///   stage, the conv or matmul gets two readers, and its epilogue runs as separate passes over
///   memory (in YOLOX's tuned package, 1.4 ms of Sigmoid passes and most of 0.9 ms of copies and
///   Muls, of 8.8 ms).
/// - *Needs multi-level tiling*: count the input tensors whose reads (all together) never mention
///   some spatial axis of extent > 1 of the stage; the stage needs tiling when the count is >= 2,
///   or when it is 1 and the stage has reduce axes. Matmul and convolution need it (each operand
///   misses an output axis, and they reduce); elementwise stages, broadcasts and plain row
///   reductions (softmax's max and sum) do not.
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/te/compute.h"

namespace kiln::te {

/// Says whether a stage has been inlined in the state being built, so that consumer and producer
/// queries can look through it.
using InlinedFn = std::function<bool(const TensorNode*)>;

/// The access facts of every tensor in one DAG, computed once at construction. Queries take any
/// tensor of the DAG (placeholders included where it makes sense: a placeholder has consumers, is
/// never inlineable and never needs tiling) and throw kiln::Error for a tensor not in the DAG.
/// "DAG order" is the order print_dag lists tensors: placeholders first, then stages producers
/// before consumers. The analysis holds its tensors by reference count, so it outlives the DAG.
class DagAnalysis {
 public:
  explicit DagAnalysis(const ComputeDAG& dag);

  /// Every read indexes with the stage's own spatial axes or constants only (see the \file).
  bool is_simple_access(const TensorNode* t) const;
  /// Non-reduction, non-extern: compute-inline may put this stage into its consumers.
  bool is_inlineable(const TensorNode* t) const;
  /// Inlineable, simple access and no expensive op: inlining costs nothing, so Ansor's
  /// always-inline rule inlines such stages on CPU without searching.
  bool is_strictly_inlineable(const TensorNode* t) const;
  /// Inlined into its one reader, every value is computed once (see the \file).
  bool inlines_into_its_reader(const TensorNode* t) const;
  /// What the always-inline sketch rule asks: not a DAG output (an output must be stored, so it
  /// cannot disappear into a consumer), and strictly inlineable or inlines into its reader.
  bool should_always_inline(const TensorNode* t) const;
  /// Whether the multi-level tiling sketch rules apply: the stage has data reuse across its
  /// output axes (see the \file for the count).
  bool needs_multi_level_tiling(const TensorNode* t) const;
  /// One of the DAG's outputs: its values must be stored in full.
  bool is_output(const TensorNode* t) const;
  /// The floating-point work of the stage (stage_flops in scheduler/tasks/dag_flops.h; 0 for a
  /// placeholder), so rules and the cost model can weigh stages.
  double flops(const TensorNode* t) const;

  /// The stages that read t, in DAG order.
  std::vector<TensorRef> direct_consumers(const TensorNode* t) const;
  /// The tensors t's stage reads (placeholders and stages), in DAG order; none for a placeholder.
  std::vector<TensorRef> direct_producers(const TensorNode* t) const;
  /// The stages that read t once inlined stages are looked through: an inlined consumer is replaced
  /// by its own consumers, recursively. In DAG order, without duplicates.
  std::vector<TensorRef> consumers(const TensorNode* t, const InlinedFn& is_inlined) const;
  /// The tensors t reads once inlined producers are looked through: an inlined producer is
  /// replaced by its own producers, recursively. Placeholders are never inlined. DAG order, no
  /// duplicates.
  std::vector<TensorRef> producers(const TensorNode* t, const InlinedFn& is_inlined) const;

  /// How many outer loops t can share with `target` when t is computed at target: over every path
  /// of reads from t to target, and every read along it, the least number of leading dimensions
  /// that the reader indexes with its own leading axes in the same position, over equal extents.
  /// 0 when target does not (even indirectly) read t, or reads it in any other way; t's rank when t
  /// is target.
  int num_common_outer_iterators(const TensorNode* t, const TensorNode* target) const;
  /// Whether t's values reach `target` elementwise: following t's single consumer, then that
  /// stage's single consumer, and so on up to target, every step has the same shape as its reader
  /// and is read only at exactly the reader's axes by a non-reduction stage. A consumer that inlines
  /// into its reader is looked through (x and sigmoid(x) both reach x * sigmoid(x)). True when t
  /// is target.
  /// This is when Ansor tiles t with target fused into it (multi-level tiling with fusion).
  bool elementwise_match(const TensorNode* t, const TensorNode* target) const;

 private:
  // One read of a producer: the index expressions of one Load.
  using Indices = std::vector<Expr>;
  struct Facts {
    TensorRef tensor;
    bool simple_access = false;
    bool inlineable = false;
    bool strictly_inlineable = false;
    bool inlines_into_reader = false;
    bool multi_level_tiling = false;
    bool output = false;
    double flops = 0;
    std::vector<size_t> producers;  // positions in order_, ascending
    std::vector<size_t> consumers;  // positions in order_, ascending
    // Per producer position: every read of it in this stage (empty lists for an extern stage).
    std::unordered_map<size_t, std::vector<Indices>> reads;
  };

  size_t position(const TensorNode* t) const;
  std::vector<TensorRef> tensors_at(const std::vector<size_t>& positions) const;
  int common_outer_of_edge(size_t producer, size_t reader) const;

  std::vector<Facts> order_;  // placeholders, then stages, as print_dag lists them
  std::unordered_map<const TensorNode*, size_t> position_;
};

/// One line per tensor, in DAG order, with its facts: "name: facts | producers ... | consumers
/// ... | flops N", where facts lists, in this order, placeholder, output, simple-access,
/// inlineable, strictly-inlineable and multi-level-tiling where they hold ("-" for none), and each
/// direct consumer shows its common outer iterators with t and "ew" when elementwise_match holds.
/// What `--dump-after=analysis` prints and what tests compare.
std::string print_analysis(const ComputeDAG& dag);

/// The constant placeholders (weights) that a reduction stage reads directly (stages tagged
/// `except_tag` left out): those whose layout the schedules rewrite into the order their tiles read
/// them (scheduler/lower/constant_layout.h).
std::vector<TensorRef> reduction_weights(const ComputeDAG& dag, const std::string& except_tag = "");

}  // namespace kiln::te
