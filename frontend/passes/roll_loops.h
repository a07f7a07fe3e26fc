/// \file Long Loops and Scans as kiln.StepLoops: the body compiled once and run in a loop.
///
/// Why: unrolled (unroll_loops.h), a loop costs compile time, memory and code per iteration, and
/// stops at kMaxUnrolledIterations. A loop with many iterations whose body keeps its carried values'
/// shapes becomes a StepLoop (frontend/ir/step_loop.h) instead, the body a closed graph: the iteration
/// number is its first input, the values it read from outside are invariant inputs (or its own
/// constants), a Scan's inputs are read at the iteration's position by a Gather inside it. Short loops
/// stay unrolled: their iterations fold and fuse with the graph around them, which a loop's body
/// cannot. A loop that does not fit (a condition decided at run time, a trip count bounded by the
/// user, a carried value that changes shape, a body that needs the iteration number at compile time
/// or holds an If decided at run time or another loop) is unrolled as before.
#pragma once
#include <cstdint>

#include "frontend/ir/graph.h"

namespace kiln {

/// Loops and Scans with at least this many iterations become StepLoops where they can.
constexpr int64_t kMinRolledIterations = 32;

/// Replaces the Loop (or opset-9+ Scan) at `g.nodes[index]`, not yet unrolled, by a StepLoop when it
/// can be one; returns whether it did. Needs the node's inputs typed.
bool roll_loop(Graph& g, size_t index);

}  // namespace kiln
