/// \file An order of the subgraphs for a smaller arena: what the compile tries before `--max-sram`
/// refuses a model.
///
/// Why: the arena holds, at each statement, every value produced and not yet read for the last time,
/// and which values those are depends on the order the subgraphs run in. Where a model branches (an
/// inception block, a detector's heads) the graph's own order may start every branch before finishing
/// one, keeping all their intermediates alive at once; running a branch to its end first frees them.
/// On a microcontroller that can be the difference between fitting in SRAM and not (Serenity, MLSys'20,
/// orders MCU networks this way; TFLite Micro runs the order it is given).
///
/// The search works on a model of the lowered program in the graph's order: each workspace buffer
/// (outermost, so a Concat's inputs count with it) is live from the first to the last subgraph that
/// touches it, with its bytes; a subgraph's temporaries are touched by it alone. A beam search over
/// the sets of subgraphs already run (each set is reached by many orders; for every set it keeps the
/// order with the lowest peak so far, then the least live after it) visits every such set when there
/// are at most `beam` per size, which is exact for chains and for narrow branching; beyond, it keeps
/// the `beam` best. The caller lowers the model again in the order found and keeps that only when its
/// real plan (statements, packing) is smaller.
#pragma once
#include <cstdint>
#include <vector>

#include "frontend/partition/partition.h"
#include "scheduler/lower/lower_model.h"

namespace kiln::lower {

struct MemoryOrder {
  std::vector<int> order;  ///< positions in SubgraphDAG::subgraphs, producers first
  int64_t peak = 0;        ///< the peak live workspace bytes of `order` in the model above
  int64_t peak_given = 0;  ///< the same for the order `prog` was lowered in
};

/// The order of the subgraphs of `sdag` (which `prog` was lowered from, in any order) with the lowest
/// peak the search finds, every buffer counted in slots of `align` bytes as the memory plan packs them. Empty `order` when the program cannot be reordered: a subgraph runs under a
/// run-time If's guard or a statement is a loop's (kiln.StepLoop).
MemoryOrder order_for_memory(const ModelProgram& prog, const SubgraphDAG& sdag, int64_t align, int beam = 256);

}  // namespace kiln::lower
