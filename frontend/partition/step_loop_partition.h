/// \file The subgraphs of kiln.StepLoop bodies, numbered after the model's own.
///
/// Why: a StepLoop (frontend/ir/step_loop.h) is one opaque node of the model's partition, and its
/// body is partitioned as a graph of its own; its subgraphs are tasks like any other (tuned, with the
/// loop's trip count as their weight) and are lowered inside the loop. Task extraction and lowering
/// must agree on which subgraph id is which, so both number them here: the body of the first loop
/// subgraph gets the ids after the model's last, the next body the ids after those.
#pragma once
#include <vector>

#include "frontend/ir/step_loop.h"
#include "frontend/partition/partition.h"

namespace kiln {

struct StepLoopPartition {
  int subgraph = 0;           // position of the loop's own subgraph in the model's SubgraphDAG
  const Node* node = nullptr;  // the StepLoop node of the model's graph
  StepLoop loop;
  SubgraphDAG body;  // the body's partition, ids continuing the model's numbering
};

/// Whether subgraph `sg` of `g` is a StepLoop (alone in its subgraph, as every opaque node is).
bool is_step_loop_subgraph(const Graph& g, const Subgraph& sg);

/// Every StepLoop subgraph of `sdag` with its body's partition. Throws Unsupported for a body that
/// holds a StepLoop itself (loops are not nested yet).
std::vector<StepLoopPartition> partition_step_loops(const Graph& g, const SubgraphDAG& sdag);

/// How many subgraph ids `sdag` and its loops' bodies use together.
size_t subgraph_id_count(const SubgraphDAG& sdag, const std::vector<StepLoopPartition>& loops);

}  // namespace kiln
