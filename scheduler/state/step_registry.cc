// The table from record prefixes to step readers, and the checks every step shares.
#include <fmt/format.h>

#include <functional>
#include <map>

#include "scheduler/state/step.h"
#include "scheduler/state/steps/annotation_step.h"
#include "scheduler/state/steps/cache_steps.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/follow_split_step.h"
#include "scheduler/state/steps/fuse_step.h"
#include "scheduler/state/steps/gpu_tile_step.h"
#include "scheduler/state/steps/layout_rewrite_step.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/reorder_step.h"
#include "scheduler/state/steps/rfactor_step.h"
#include "scheduler/state/steps/split_step.h"
#include "scheduler/state/steps/storage_align_step.h"

namespace kiln::state {

StepRef step_from_json(const nlohmann::json& j) {
  using Reader = std::function<StepRef(const nlohmann::json&)>;
  // Fields of each step, and how many trailing ones it may leave out (a field added later, so older
  // records still replay).
  struct Form {
    size_t fields;
    Reader read;
    size_t optional = 0;
  };
  static const std::map<std::string, Form> readers = {
      {"AN", {4, AnnotationStep::from_json}},     {"FU", {3, FuseStep::from_json}},
      {"PR", {4, PragmaStep::from_json}},         {"RE", {3, ReorderStep::from_json}},
      {"SP", {6, SplitStep::from_json}},          {"FSP", {5, FollowSplitStep::from_json}},
      {"FFSP", {6, FollowFusedSplitStep::from_json}}, {"SA", {5, StorageAlignStep::from_json}},
      {"CA", {4, ComputeAtStep::from_json}},      {"CI", {2, ComputeInlineStep::from_json}},
      {"CR", {2, ComputeRootStep::from_json}},    {"CHR", {4, CacheReadStep::from_json}},
      {"CHW", {3, CacheWriteStep::from_json}},    {"RF", {4, RfactorStep::from_json}},
      {"LR", {2, LayoutRewriteStep::from_json}},  {"GT", {6, GpuTileStep::from_json, 1}},
  };
  if (!j.is_array() || j.empty() || !j[0].is_string()) throw ScheduleError("a step must be an array starting with its prefix: " + j.dump());
  auto it = readers.find(j[0].get<std::string>());
  if (it == readers.end()) throw ScheduleError("unknown step prefix '" + j[0].get<std::string>() + "'");
  const Form& form = it->second;
  if (j.size() > form.fields || j.size() < form.fields - form.optional)
    throw ScheduleError(form.optional ? fmt::format("step {} has {} fields, expected {} to {}", j.dump(), j.size(),
                                                    form.fields - form.optional, form.fields)
                                      : fmt::format("step {} has {} fields, expected {}", j.dump(), j.size(), form.fields));
  try {
    return form.read(j);
  } catch (const nlohmann::json::exception& e) {
    throw ScheduleError("malformed step " + j.dump() + ": " + e.what());
  }
}

const Stage& schedulable_stage(const State& s, int id, const char* step_name) {
  if (id < 0 || static_cast<size_t>(id) >= s.stages().size())
    throw ScheduleError(fmt::format("{}: stage {} does not exist (the state has {} stages)", step_name, id, s.stages().size()));
  const Stage& st = s.stage(id);
  if (st.kind == StageKind::Placeholder) throw ScheduleError(fmt::format("{}: '{}' is an input, not a computed stage", step_name, st.name()));
  if (st.kind == StageKind::Extern)
    throw ScheduleError(fmt::format("{}: '{}' is computed by a runtime kernel and has no loops to schedule", step_name, st.name()));
  return st;
}

void check_iter(const Stage& st, int iter, const char* step_name) {
  if (iter < 0 || static_cast<size_t>(iter) >= st.iters.size())
    throw ScheduleError(fmt::format("{}: stage '{}' has no loop {} (it has {})", step_name, st.name(), iter, st.iters.size()));
}

}  // namespace kiln::state
