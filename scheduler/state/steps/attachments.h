/// \file Keeping attachments valid when a stage's loops change: a stage computed at a loop that a
/// split replaces moves to the innermost part, one at a fused loop moves to the fused loop (as TVM's
/// attach map does), so a later split of a target never orphans what is computed inside it.
#pragma once
#include "scheduler/state/state.h"

namespace kiln::state {

/// Stages attached to node `from` of stage `stage` are attached to node `to` instead.
void move_attachments(State& s, int stage, int from, int to);

/// Whether stage `stage` has any stage attached to one of its loops.
bool has_attached(const State& s, int stage);

}  // namespace kiln::state
