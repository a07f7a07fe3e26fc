#include "scheduler/state/steps/follow_split_step.h"

#include <fmt/format.h>

#include "scheduler/state/steps/split_step.h"

namespace kiln::state {
namespace {

const SplitStep& source_split(const State& s, int src, const char* step_name) {
  if (src < 0 || static_cast<size_t>(src) >= s.steps().size())
    throw ScheduleError(fmt::format("{}: source step {} does not exist yet", step_name, src));
  auto* sp = dynamic_cast<const SplitStep*>(s.steps()[static_cast<size_t>(src)].get());
  if (!sp) throw ScheduleError(fmt::format("{}: source step {} is not a split", step_name, src));
  return *sp;
}

std::string lengths_text(const std::vector<std::optional<int64_t>>& ls) {
  std::string t;
  for (const auto& l : ls) t += (t.empty() ? "" : ", ") + (l ? std::to_string(*l) : std::string("?"));
  return t;
}

}  // namespace

std::vector<std::optional<int64_t>> FollowSplitStep::lengths(const State& s) const {
  const SplitStep& src = source_split(s, src_step_id, "follow_split");
  if (n_split < 1 || static_cast<size_t>(n_split) > src.lengths.size())
    throw ScheduleError(fmt::format("follow_split: n_split {} outside 1..{}", n_split, src.lengths.size()));
  std::vector<std::optional<int64_t>> out(src.lengths.begin(), src.lengths.begin() + (n_split - 1));
  std::optional<int64_t> last = 1;
  for (size_t j = static_cast<size_t>(n_split - 1); j < src.lengths.size(); ++j)
    last = (last && src.lengths[j]) ? std::optional<int64_t>(*last * *src.lengths[j]) : std::nullopt;
  out.push_back(last);
  return out;
}

void FollowSplitStep::apply_to(State& s) const { apply_split(s, stage_id, iter_id, lengths(s), true, "follow_split"); }

std::string FollowSplitStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  return fmt::format("{}.follow_split({}, step {}, [{}])", st.name(), st.node_of(iter_id).name, src_step_id, lengths_text(lengths(s)));
}

std::optional<int64_t> FollowFusedSplitStep::length(const State& s) const {
  std::optional<int64_t> product = 1;
  for (int src : src_step_ids) {
    const SplitStep& sp = source_split(s, src, "follow_fused_split");
    if (level < 0 || static_cast<size_t>(level) >= sp.lengths.size())
      throw ScheduleError(fmt::format("follow_fused_split: level {} outside the lengths of step {}", level, src));
    const auto& l = sp.lengths[static_cast<size_t>(level)];
    product = (product && l) ? std::optional<int64_t>(*product * *l) : std::nullopt;
  }
  return product;
}

void FollowFusedSplitStep::apply_to(State& s) const {
  if (src_step_ids.empty()) throw ScheduleError("follow_fused_split: no source steps");
  apply_split(s, stage_id, iter_id, {length(s)}, factor_or_nparts, "follow_fused_split");
}

std::string FollowFusedSplitStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  auto l = length(s);
  return fmt::format("{}.follow_fused_split({}, level {}, [{}]{})", st.name(), st.node_of(iter_id).name, level,
                     l ? std::to_string(*l) : std::string("?"), factor_or_nparts ? "" : ", nparts");
}

}  // namespace kiln::state
