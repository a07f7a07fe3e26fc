/// \file What the stage-inserting steps (cache-read, cache-write, rfactor) share: a name no stage has
/// yet, fresh loop variables (lowering substitutes by variable identity, so no two stages may share a
/// variable), a new stage with its own identity tensor, and rebuilding a stage around a rewritten op.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "scheduler/state/state.h"

namespace kiln::state {

/// `base` if no stage of `s` is named so, else `base.1`, `base.2`, ...: stage names stay unique so
/// that State::stage_id and printed states remain unambiguous after repeated cache steps.
std::string unused_stage_name(const State& s, const std::string& base);

/// A new Int64 variable per name: the axes of a rewritten op must not be the variables of another stage.
std::vector<te::Expr> fresh_vars(const std::vector<std::string>& names);

/// A new compute stage for `op` (named op->name) with a new identity tensor that loads in other
/// stages refer to; the tensor carries no te stage of its own (the state's `op` is the computation).
Stage new_compute_stage(std::shared_ptr<const te::Stage> op, const std::string& scope);

/// `st` with its loops rebuilt from `op` (initial nest) but its identity, scope, compute location and
/// storage alignment kept: what a step that rewrites a stage's computation in place leaves behind.
void rebuild_stage(Stage& st, std::shared_ptr<const te::Stage> op);

/// Throws ScheduleError when a loop of `st` carries an annotation or pragma: a step that rebuilds the
/// stage's loops would silently drop it.
void check_no_annotations(const Stage& st, const char* step_name);

}  // namespace kiln::state
