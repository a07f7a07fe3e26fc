/// \file Transform steps: the units a schedule is made of. A step addresses stages and iterators by
/// index, applies itself to a State (checking its preconditions first), prints itself as a schedule call
/// and serializes to the JSON array of TVM's auto-scheduler log (v0.6), so records replay and diff.
///
/// Checklist for adding a step:
///  1. A header `steps/<name>_step.h` declaring a struct derived from Step with its fields, and its
///     record prefix (two or three capital letters not used yet); the .cc holds apply/print/to_json.
///  2. `apply` checks every precondition first and throws ScheduleError naming the stage and iterator;
///     it must leave the State unchanged when it throws (check, then mutate).
///  3. `to_json` writes ["PREFIX", stage_id, fields...] in a fixed order; add the prefix and a reader to
///     the table in step_registry.cc.
///  4. If the step inserts stages, renumber through State::insert_stage; if it changes a stage's loops,
///     move attachments that point at removed nodes (steps/attachments.h).
///  5. Lowering (scheduler/lower/lower_state.cc) must honour the step's effect; add the step to the
///     round-trip test (tests/scheduler/state/step_json_test.cc) and document it in docs/records.md.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/state/state.h"

namespace kiln::state {

class Step {
 public:
  explicit Step(int stage_id) : stage_id(stage_id) {}
  virtual ~Step() = default;
  /// The record prefix: "SP", "FU", ...
  virtual const char* prefix() const = 0;
  /// Checks preconditions against `s`, then transforms it. Does not append itself (State::apply does).
  virtual void apply_to(State& s) const = 0;
  virtual nlohmann::json to_json() const = 0;
  /// `s` is the state the step is applied to (names come from it): `C.split(i, [16, 4])`.
  virtual std::string print(const State& s) const = 0;

  int stage_id;
};

/// Reads one step from its JSON array; throws ScheduleError on an unknown prefix or malformed fields.
StepRef step_from_json(const nlohmann::json& j);

/// The stage `id` of `s` as a compute stage whose loops steps may change; throws ScheduleError otherwise.
const Stage& schedulable_stage(const State& s, int id, const char* step_name);
/// Checks `iter` indexes the stage's loop nest.
void check_iter(const Stage& st, int iter, const char* step_name);

}  // namespace kiln::state
