/// \file Dead-node removal.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Drops nodes that no graph output depends on, and nodes whose outputs were all folded to
/// constants, so later stages see only the work left to do at run time. Unused values go too.
void remove_dead_nodes(Graph& g);

}  // namespace kiln
