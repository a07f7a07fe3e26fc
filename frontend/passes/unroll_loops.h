/// \file Loop and Scan as the nodes of their iterations.
///
/// Why unrolled: kiln compiles static shapes, and a Loop's scan outputs and a Scan's outputs have as
/// many rows as the loop runs iterations, so the trip count must be known at compile time anyway (a
/// trip count fed by an input is frozen, as a Reshape target is). Unrolled, every iteration is
/// ordinary nodes: they fold, fuse, tile and tune with the rest of the graph, and the identical tasks
/// of identical iterations are one task. Compile time and code size grow with the trip count, so
/// long loops become loops in the generated code instead (roll_loops.h, tried first), and what is
/// left to unroll stops at kMaxUnrolledIterations.
///
/// Loop: iteration k splices the body with the iteration number k (a constant), the condition and
/// the loop-carried values bound to its inputs. A trip count M known only at run time needs a bound
/// from the user (kMaxTripCountAttr); iteration k then runs when k < M, guarded as below. It is done one iteration at a time, during shape
/// inference: the node is replaced by iteration k and a Loop for the rest (its internal attribute
/// kiln_iteration = k + 1), so whether the body's condition output is constant is known before the
/// next iteration is made. A constant condition needs nothing more. One known only at run time guards
/// the iterations it decides (Node::guards, as a run-time If's branches), and each carried value is
/// an IfMerge of the iteration's result and the value before it; such a loop may not have scan
/// outputs (their length would be decided at run time). Scan outputs are each iteration's values,
/// stacked along a new first axis by one Concat at the end.
///
/// Scan (opset 9 and later): all iterations at once, the sequence length being the scan inputs'
/// extent along their axes; each iteration reads element t (or L-1-t, reversed) of every scan input
/// and its scan outputs are stacked along their axes, reversed where the direction says so. Opset
/// 8's Scan, whose inputs have a batch axis first, is one such Scan per batch row, restacked.
#pragma once
#include <cstdint>
#include <string>

#include "frontend/ir/graph.h"

namespace kiln {

constexpr int64_t kMaxUnrolledIterations = 4096;

/// The attribute a Loop whose trip count is known only at run time is bounded by (the user's
/// `--max-trip-count NODE=N`, set by bind_input_shapes): the loop is unrolled that many iterations,
/// each guarded by `k < M` (and the condition), and the package runs at most N.
constexpr const char* kMaxTripCountAttr = "kiln_max_trip_count";

/// The package header's line for Loop `loop` bounded by --max-trip-count `bound` (Graph::limits).
std::string max_trip_count_limit(const Node& loop, int64_t bound);

/// Replaces the Loop at `g.nodes[index]` by its next iteration and a Loop for the rest, or, when it
/// has run its last iteration, by the nodes that pass its results on. Throws NotConstant for a trip
/// count not known at compile time and not bounded (or, for a loop with scan outputs, not known, or
/// an initial condition not known), and Unsupported for loops it cannot bound.
void unroll_loop_step(Graph& g, size_t index);

/// Replaces the Scan at `g.nodes[index]` by all its iterations and the nodes that pass its results on.
/// Needs the scan inputs typed. Throws Unsupported for opset 8's sequence_lens shorter than the sequence.
void unroll_scan(Graph& g, size_t index);

}  // namespace kiln
