/// \file LSTM, GRU and RNN as MatMuls and element-wise steps.
///
/// Why: a recurrent layer is two kinds of work. The input projection W x_t of every step does not
/// depend on the recurrence, so it is one MatMul over all steps at once ([seq * batch, input] x
/// [input, gates * hidden]), as large as the layer's data allows. Only R h_{t-1} and the gate
/// arithmetic are sequential: per step one MatMul [batch, hidden] x [hidden, gates * hidden] and
/// element-wise ops the partitioner fuses into it. Written with the graph's own ops, every engine,
/// target and schedule handles them; the tuner sees the projections and the step MatMuls as tasks,
/// and the steps' identical tasks are one task. With constant weights, the transposes, slices and
/// bias sums fold away at compile time.
///
/// Steps are either one kiln.StepLoop per direction (`roll_steps`: the body is one step, compiled once
/// and run in a loop by the generated code, so compile time and code size do not grow with the
/// sequence), or unrolled, a few nodes a step (for engines and targets without loops: the te engine,
/// GPU programs).
///
/// sequence_lens: a row past its length keeps its state and outputs zeros. Each step selects per
/// batch row (Where on `t < sequence_lens[b]`), so one formulation serves both directions: a reverse
/// direction runs t = seq-1 .. 0, and a row of length L only starts changing at t = L-1.
/// Semantics (gate order, activation parameters, clip) are frontend/ops/recurrent_spec.h's.
#pragma once
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

struct ExpandOptions {
  bool roll_steps = false;  // each direction's steps as a kiln.StepLoop
};

/// The nodes that compute recurrent node `n` of `g`: they read its inputs and write its outputs,
/// through new values added to `g` without types (infer_shapes gives them theirs). Needs `n`'s
/// inputs typed. Throws Unsupported for a sequence of length 0.
std::vector<Node> expand_recurrent_node(Graph& g, const Node& n, const ExpandOptions& o = {});

/// Replaces every LSTM, GRU and RNN of `g` by its expansion and infers shapes again (which folds
/// what constant weights make constant, and makes the constant weights a StepLoop reads constants of
/// its body); returns how many it replaced.
int expand_recurrent(Graph& g, const ExpandOptions& o = {});

}  // namespace kiln
