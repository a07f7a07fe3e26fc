/// \file The default schedule computes a stage inside the one stage that reads it.
///
/// Why: the default schedule gives every stage of a subgraph a loop nest and a buffer of its own, so
/// an element-wise chain (an LSTM step's gates: slice, sigmoid, tanh, products, sums) was a pass over
/// memory per node: fifteen loop nests per step, each storing what the next one loads. A stage read
/// by exactly one stage, at one place in its body, with as many elements, is now computed where that
/// reader loads it, so the chain is one loop nest. It is the default schedule's form of Ansor's
/// always-inline rule (tuned programs inline through their own steps), with differences:
/// - a stage read at a shifted index (a Slice of the gates) inlines too, as the reader still
///   computes each of its elements once;
/// - both the stage and its reader must read in order (the last dimension along the last axis,
///   stride 1): a Transpose keeps its tiled copy through a local buffer, a Reshape its reading at its
///   own flat position, which inlined would become a gather per vector;
/// - nothing inlines into a runtime kernel, and into a reduction only a widening stage (a
///   DequantizeLinear, whose buffer would be wider than what it reads) that the reduction reads each
///   element of once (a global average pool): the default schedule reads other reductions' inputs as
///   buffers (a conv's padded input keeps its padded-plane plan, a matmul's operand its packed
///   layout), and a stage that selects (a Concat, a Pad, Where) keeps its loop nest, which the
///   default schedule splits at the select's bounds.
#pragma once
#include <map>

#include "scheduler/tasks/lower_subgraph.h"

namespace kiln::lower {

/// `sg` with every stage that qualifies (above) substituted into its reader. Stages whose bodies
/// changed are new tensors: `rebuilt` maps each old one to its replacement (subgraph outputs
/// included, which are never inlined themselves); placeholders stay the same tensors.
LoweredSubgraph inline_into_readers(const LoweredSubgraph& sg, std::map<const te::TensorNode*, te::TensorRef>& rebuilt);

}  // namespace kiln::lower
