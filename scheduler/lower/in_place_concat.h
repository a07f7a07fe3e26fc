/// \file Concats (and run-time Ifs' merges, below) without a copy: each input of a Concat is computed
/// straight into its slice of the Concat's output buffer, and the Concat itself runs no code.
///
/// In the blocked layout a Concat over channels (batch 1) puts each input at one contiguous run of
/// the output: [1, C/16, H, W, 16] sliced on the block axis. Copying them took 1-5% of squeezenet,
/// YOLOX and dcgan (the per-input copies of `partitioned_on_select_axis`). When every input qualifies
/// the lowering places each input's buffer inside the output's (an alias at a byte offset), so its
/// producer writes it there and the Concat's subgraph is dropped; chains (DenseNet's concat of a
/// concat) alias transitively into the last one. The memory plan then keeps the outermost buffer
/// alive from its first slice's producer to its last reader.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"

namespace kiln::lower {

/// One Concat whose inputs live inside its output (or one Slice whose output lives inside its
/// input: `output` is then the Slice's input, the outer buffer).
struct InPlaceConcat {
  int subgraph = 0;    // index into SubgraphDAG::subgraphs: the Concat, then only Identities
  std::string output;  // the subgraph's output value: the Concat's, or its last Identity's
  struct Slice {
    std::string value;   // an input of the Concat
    int64_t offset = 0;  // its first byte inside the output
  };
  std::vector<Slice> inputs;
};

/// The Concats of `sdag` that can run in place. A Concat qualifies when it is a subgraph of its own,
/// or followed there only by a chain of Identity nodes; the subgraph's output is no graph output; every input is a distinct value that another subgraph computes,
/// no graph output, not already placed inside another Concat, and not empty; the axes before the
/// concat axis all have extent 1 (each input is one contiguous run of the output); and every slice
/// starts on a 64-byte boundary (the alignment every buffer has). Ordered by subgraph.
std::vector<InPlaceConcat> plan_in_place_concats(const Graph& g, const SubgraphDAG& sdag);

/// The kiln.IfMerges of `sdag` whose two sides can share the merge's buffer (a run-time If's branches'
/// outputs in one place, as issue 19 asks): the merge is a subgraph of its own and no graph output;
/// each side is computed only in its branch (its subgraph is guarded by the condition, true for the
/// then side, false for the else side), distinct, no graph output and not placed already (in
/// `placed_already` or another merge). Only the branch taken runs, so the one buffer holds its value
/// and the merge runs no code. Nested Ifs chain as Concats do.
std::vector<InPlaceConcat> plan_in_place_if_merges(const Graph& g, const SubgraphDAG& sdag,
                                                   const std::vector<InPlaceConcat>& placed_already);

/// The Slices of `sdag` that can run in place, the mirror of a Concat: the part lives inside the
/// whole, so its readers read the whole's buffer at an offset (a merged conv's output split back
/// into the convs', frontend/subst). A Slice qualifies when it is a subgraph of its own, unguarded,
/// of one axis with unit steps, before which every extent is 1 (the part is one contiguous run),
/// starting on a 64-byte boundary; the whole is computed by another unguarded subgraph and neither is
/// a graph output, and the part is not placed inside something else already (in `placed_already`).
/// A subgraph of Reshapes, Flattens, Squeezes, Unsqueezes and Identities, each reading the one
/// before, is on the same terms a view too: the same bytes, at offset 0 (a loop's stacked output
/// reshaped and squeezed on its way to the next layer costs no copy).
/// In the returned entries `output` is the whole and the one input the part.
std::vector<InPlaceConcat> plan_in_place_slices(const Graph& g, const SubgraphDAG& sdag,
                                                const std::vector<InPlaceConcat>& placed_already);

/// All three: every subgraph whose inputs live inside its output, or (a Slice) whose output lives
/// inside its input, ordered by subgraph.
std::vector<InPlaceConcat> plan_in_place_outputs(const Graph& g, const SubgraphDAG& sdag);

/// The subgraph positions of `plans`: subgraphs that run no code.
std::set<int> subgraphs_of(const std::vector<InPlaceConcat>& plans);

}  // namespace kiln::lower
