#include "scheduler/state/steps/fuse_step.h"

#include <fmt/format.h>

#include "scheduler/state/steps/attachments.h"

namespace kiln::state {

void FuseStep::apply_to(State& s) const {
  const Stage& cst = schedulable_stage(s, stage_id, "fuse");
  if (iter_ids.empty()) throw ScheduleError("fuse: stage '" + cst.name() + "': no loops to fuse");
  for (size_t k = 0; k < iter_ids.size(); ++k) {
    check_iter(cst, iter_ids[k], "fuse");
    if (k > 0 && iter_ids[k] != iter_ids[k - 1] + 1)
      throw ScheduleError(fmt::format("fuse: stage '{}': loops {} and {} are not adjacent", cst.name(), iter_ids[k - 1], iter_ids[k]));
    if (cst.node_of(iter_ids[k]).kind != cst.node_of(iter_ids[0]).kind)
      throw ScheduleError(fmt::format("fuse: stage '{}': loops '{}' and '{}' differ in kind (spatial and reduction)",
                                      cst.name(), cst.node_of(iter_ids[0]).name, cst.node_of(iter_ids[k]).name));
  }
  // A stage computed at an inner fused loop would run once per fused iteration instead; TVM moves it
  // to the fused loop too, so we do the same.
  Stage& st = s.mutable_stage(stage_id);
  IterRelation r;
  r.kind = IterRelation::Fuse;
  std::string name;
  for (int i : iter_ids) {
    r.in.push_back(st.iters[static_cast<size_t>(i)].node);
    name += st.nodes[static_cast<size_t>(r.in.back())].name + "@";
  }
  int id = static_cast<int>(st.nodes.size());
  st.nodes.push_back({name, st.nodes[static_cast<size_t>(r.in[0])].kind, -1});
  r.out = {id};
  st.relations.push_back(r);
  st.iters.erase(st.iters.begin() + iter_ids.front(), st.iters.begin() + iter_ids.back() + 1);
  st.iters.insert(st.iters.begin() + iter_ids.front(), Iterator{id, IteratorAnnotation::None, 0});
  propagate_extents(st);
  for (int n : r.in) move_attachments(s, stage_id, n, id);
}

std::string FuseStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  std::string names;
  for (int i : iter_ids) names += (names.empty() ? "" : ", ") + st.node_of(i).name;
  return fmt::format("{}.fuse({})", st.name(), names);
}

}  // namespace kiln::state
