/// \file cache-read and cache-write: a new stage that copies a tensor, so the computation works in a
/// small buffer (a register tile for cache-write on CPU, shared memory for cache-read on GPU).
#pragma once
#include <vector>

#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["CHR", stage_id, scope, [reader_stage_ids]]. Adds stage "<name>.<scope>" right after the
/// stage, copying it; the readers (each must read the stage directly) read the copy instead. Stages
/// after the insertion point are renumbered.
struct CacheReadStep : Step {
  CacheReadStep(int stage_id, std::string scope, std::vector<int> reader_stage_ids)
      : Step(stage_id), scope(std::move(scope)), reader_stage_ids(std::move(reader_stage_ids)) {}
  const char* prefix() const override { return "CHR"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"CHR", stage_id, scope, reader_stage_ids}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<CacheReadStep>(j.at(1).get<int>(), j.at(2).get<std::string>(), j.at(3).get<std::vector<int>>());
  }

  std::string scope;
  std::vector<int> reader_stage_ids;
};

/// Record: ["CHW", stage_id, scope]. Adds stage "<name>.<scope>" just before the stage, computing what
/// the stage computed (its reduction included, with its loops); the stage becomes a copy of it. The
/// stage's loops must not have been transformed yet. Stages from the insertion point on are renumbered
/// (the original stage's id becomes stage_id + 1).
struct CacheWriteStep : Step {
  CacheWriteStep(int stage_id, std::string scope) : Step(stage_id), scope(std::move(scope)) {}
  const char* prefix() const override { return "CHW"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"CHW", stage_id, scope}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<CacheWriteStep>(j.at(1).get<int>(), j.at(2).get<std::string>());
  }

  std::string scope;
};

}  // namespace kiln::state
