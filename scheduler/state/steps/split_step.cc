#include "scheduler/state/steps/split_step.h"

#include <fmt/format.h>

#include "scheduler/state/steps/attachments.h"

namespace kiln::state {

void apply_split(State& s, int stage_id, int iter_id, const std::vector<std::optional<int64_t>>& lengths,
                 bool inner_to_outer, const char* step_name) {
  const Stage& cst = schedulable_stage(s, stage_id, step_name);
  check_iter(cst, iter_id, step_name);
  if (lengths.empty()) throw ScheduleError(fmt::format("{}: stage '{}': no split lengths", step_name, cst.name()));
  // Loop extents are products of split lengths: a product that wraps (a hand-edited record with
  // [2^32, 2^32]) became extent 0, a division by zero or a loop that silently never runs. No loop kiln
  // schedules comes near 2^31 iterations, so larger tiles are refused before any arithmetic.
  constexpr int64_t kMaxTile = (int64_t{1} << 31) - 1;
  int64_t product = 1;
  for (const auto& l : lengths) {
    if (!l) continue;
    if (*l <= 0) throw ScheduleError(fmt::format("{}: stage '{}': split length {} is not positive", step_name, cst.name(), *l));
    if (*l > kMaxTile || (product *= *l) > kMaxTile)
      throw ScheduleError(fmt::format("{}: stage '{}': split lengths multiply past {} iterations", step_name, cst.name(), kMaxTile));
  }
  Stage& st = s.mutable_stage(stage_id);
  const Iterator old = st.iters[static_cast<size_t>(iter_id)];
  const IterNode parent = st.nodes[static_cast<size_t>(old.node)];
  IterRelation r;
  r.kind = IterRelation::Split;
  r.in = {old.node};
  r.lengths = lengths;
  r.inner_to_outer = inner_to_outer;
  std::vector<Iterator> parts;
  for (size_t k = 0; k <= lengths.size(); ++k) {
    int id = static_cast<int>(st.nodes.size());
    st.nodes.push_back({fmt::format("{}.{}", parent.name, k), parent.kind, -1});
    r.out.push_back(id);
    parts.push_back({id, IteratorAnnotation::None, 0});
  }
  st.relations.push_back(r);
  st.iters.erase(st.iters.begin() + iter_id);
  st.iters.insert(st.iters.begin() + iter_id, parts.begin(), parts.end());
  propagate_extents(st);
  move_attachments(s, stage_id, old.node, r.out.back());
}

void SplitStep::apply_to(State& s) const { apply_split(s, stage_id, iter_id, lengths, inner_to_outer, "split"); }

nlohmann::json lengths_to_json(const std::vector<std::optional<int64_t>>& lengths) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& l : lengths) a.push_back(l ? nlohmann::json(*l) : nlohmann::json(nullptr));
  return a;
}

std::vector<std::optional<int64_t>> lengths_from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw ScheduleError("split lengths must be an array");
  std::vector<std::optional<int64_t>> out;
  for (const auto& v : j) {
    if (v.is_null()) out.push_back(std::nullopt);
    else if (v.is_number_integer()) out.push_back(v.get<int64_t>());
    else throw ScheduleError("split length must be an integer or null");
  }
  return out;
}

nlohmann::json SplitStep::to_json() const {
  return {"SP", stage_id, iter_id, extent, lengths_to_json(lengths), inner_to_outer ? 1 : 0};
}

StepRef SplitStep::from_json(const nlohmann::json& j) {
  return std::make_shared<SplitStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).is_null() ? -1 : j.at(3).get<int64_t>(),
                                     lengths_from_json(j.at(4)), j.at(5).get<int>() != 0);
}

std::string SplitStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  std::string ls;
  for (const auto& l : lengths) ls += (ls.empty() ? "" : ", ") + (l ? std::to_string(*l) : std::string("?"));
  return fmt::format("{}.split({}, [{}]{})", st.name(), st.node_of(iter_id).name, ls, inner_to_outer ? "" : ", nparts");
}

}  // namespace kiln::state
