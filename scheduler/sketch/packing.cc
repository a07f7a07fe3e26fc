#include "scheduler/sketch/packing.h"

#include "scheduler/te/substitute.h"

namespace kiln::sketch {

using namespace state;

int right_hand_operand(const State& s, int stage, size_t row_from_end) {
  const Stage& st = s.stage(stage);
  std::vector<const te::ExprNode*> axes;  // the spatial axes longer than 1
  for (size_t a = 0; a < st.op->axes.size(); ++a)
    if (st.op->shape[a] > 1) axes.push_back(st.op->axes[a].get());
  if (axes.size() < 2 || row_from_end >= axes.size()) return -1;
  const te::ExprNode* vec = axes.back();
  const te::ExprNode* row = axes[axes.size() - 1 - row_from_end];
  int operand = -1;
  te::visit_loads(st.op->body, [&](const te::Expr& load) {
    if (operand >= 0 || load->args.empty() || !te::mentions(load->args.back(), vec)) return;
    for (const te::Expr& a : load->args)
      if (te::mentions(a, row)) return;
    for (int i = 0; i < static_cast<int>(s.stages().size()); ++i)
      if (s.stage(i).kind == StageKind::Placeholder && s.stage(i).tensor.get() == load->tensor.get()) operand = i;
  });
  return operand < stage ? operand : -1;
}

bool is_packing_stage(const State& s, int stage) { return s.stage(stage).scope == kPackScope; }

}  // namespace kiln::sketch
