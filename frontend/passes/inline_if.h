/// \file An If becomes the nodes of its branches.
///
/// Why: exporters emit If on values that are constant once the input shapes are bound (PyTorch's
/// tracing of `if x.shape[0] == 1`, TensorFlow's shape checks), and speech and detection models carry
/// them. Such an If is no control flow at all: shape inference folds its condition (Shape -> Gather ->
/// Equal), and the branch it takes is spliced in where the If stood, its values renamed apart from the
/// graph's and its outputs passed on by Identity nodes, so every later stage sees an ordinary graph.
///
/// An If whose condition is known only at run time (Silero VAD's sample rate, a model's mode flag)
/// splices both branches, each node guarded by the condition (Node::guards: the partitioner keeps
/// guarded nodes in subgraphs of their own guard, the generated code runs them only when it holds,
/// the reference interpreter skips them otherwise). Each If output is then a kiln.IfMerge of the two
/// branch values, which picks the one the condition names. Both branches' output types must agree:
/// an If whose branches give different shapes is an error naming it (ahead-of-time code has one
/// shape per value), unless its condition folds.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Replaces the If at `g.nodes[index]` by its branches as above. Spliced nodes and values are named
/// "<If's name>/<their name>" (then-branch values of a run-time If "<If>/then/<name>", else-branch
/// ones "<If>/else/<name>"), made unique, so a message about one of them says which If it came from.
/// Needs the condition typed. Throws Error when a branch is malformed (missing, or a number of outputs
/// other than the If's); infer_shapes prefixes the file.
void inline_if(Graph& g, size_t index);

}  // namespace kiln
