#include "scheduler/state/steps/attachments.h"

namespace kiln::state {

void move_attachments(State& s, int stage, int from, int to) {
  for (size_t i = 0; i < s.stages().size(); ++i) {
    const Stage& st = s.stages()[i];
    if (st.compute_at == ComputeAtKind::Iter && st.attach_stage == stage && st.attach_node == from)
      s.mutable_stage(static_cast<int>(i)).attach_node = to;
  }
}

bool has_attached(const State& s, int stage) {
  for (const Stage& st : s.stages())
    if (st.compute_at == ComputeAtKind::Iter && st.attach_stage == stage) return true;
  return false;
}

}  // namespace kiln::state
