/// \file Sequences and optionals resolved at compile time into the tensors they hold.
///
/// Why at compile time: kiln compiles static shapes, and every sequence op's result is known from its
/// inputs' structure (how many tensors, which are present) when the positions it takes are constants,
/// as they are in the models that use them (a Loop appending one tensor per iteration, an If that
/// returns an empty or a full optional, SplitToSequence feeding ConcatFromSequence). So a sequence is
/// a list of tensor values (Value::elements) and an optional zero or one value; the ops become
/// aliasing, or tensor ops (SplitToSequence -> Slice and Reshape, ConcatFromSequence -> Concat,
/// SequenceAt -> Identity, SequenceMap -> its body once per element), and nothing of them is left for
/// the backends. A position known only at run time needs its inputs frozen (NotConstant); where both
/// branches of a run-time If yield sequences of one length or optionals alike, their tensors merge.
/// This departs from issue 19's design (a sequence with a maximum length fixed at compile time): the
/// length is exact, which every ONNX node test and every model met so far allows.
#pragma once
#include <cstddef>

#include "frontend/ir/graph.h"

namespace kiln {

/// True for a node shape inference hands to resolve_sequence_node: a sequence or optional op, or any
/// node reading a sequence or an optional (Identity, kiln.IfMerge; other ops refuse them).
bool reads_or_makes_sequences(const Node& n, const Graph& g);

/// Replaces g.nodes[index] by the tensor nodes that compute it (possibly none), setting its outputs'
/// kinds and elements; the nodes put in place are inferred next, as any other. Throws Error naming the
/// node for a bad position, an empty optional read, or an op that takes no sequence; NotConstant for a
/// position, or a run-time If's condition, that must be known at compile time.
void resolve_sequence_node(Graph& g, size_t index);

/// Replaces each sequence or optional in g.outputs by the tensors it holds (Graph::io_parts), each
/// copied by an Identity to a value "<output>.<i>" (or "<output>.value") appended to g.nodes.
void flatten_composite_outputs(Graph& g);

}  // namespace kiln
