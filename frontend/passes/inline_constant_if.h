/// \file An If whose condition is known at compile time becomes the nodes of its branch.
///
/// Why: exporters emit If on values that are constant once the input shapes are bound (PyTorch's
/// tracing of `if x.shape[0] == 1`, TensorFlow's shape checks), and speech and detection models carry
/// them. Such an If is no control flow at all: shape inference folds its condition (Shape -> Gather ->
/// Equal), and the branch it takes is spliced in where the If stood, its values renamed apart from the
/// graph's and its outputs passed on by Identity nodes, so every later stage sees an ordinary graph.
/// An If whose condition depends on the input data is refused, naming the node; compiling both
/// branches and choosing at run time is issue 19's next step.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Replaces the If at `g.nodes[index]` by the nodes of the branch its (constant) condition selects.
/// The branch's nodes and values are named "<If's name>/<their name>" (made unique), so a message about
/// one of them says which If it came from.
/// Throws Unsupported naming the node when the condition is not a constant, Error when the branch is
/// malformed (missing, or a number of outputs other than the If's); infer_shapes prefixes the file.
void inline_constant_if(Graph& g, size_t index);

}  // namespace kiln
