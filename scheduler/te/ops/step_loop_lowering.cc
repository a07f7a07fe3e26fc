// kiln.StepLoop as tensor expressions: its iterations unrolled (frontend/passes/step_loop_bodies.h),
// lowered node by node. Compiled packages run the body in a loop instead (scheduler/lower/lower_model.h);
// this serves the te engine, which has no loops between stages.
#include "frontend/passes/step_loop_bodies.h"
#include "scheduler/te/ops/misc_family_lowering.h"
#include "scheduler/te/ops/rewritten_lowering.h"

namespace kiln::te::misc {
namespace {

void lower_step_loop(LowerContext& c) {
  lower_through_rewrite(c, [](Graph& g) { unroll_step_loops(g); });
}

}  // namespace

void register_step_loop_lowering(LoweringRegistry& r) {
  r.add({"StepLoop", "kiln", lower_step_loop});
}

}  // namespace kiln::te::misc
