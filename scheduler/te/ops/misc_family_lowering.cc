// The misc family's lowering entry point, and the ops that are not loop nests (Det, NonMaxSuppression,
// NonZero, Unique) as extern stages. Every other op of the family has a lowering file named for it
// (bitcast_lowering.cc, swiglu_lowering.cc, tensor_scatter_lowering.cc, ml_domain_lowering.cc,
// training_optimizer_lowering.cc, sampling_lowering.cc, signal_lowering.cc), mirroring frontend/ops.
#include <string>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te {
namespace misc {
namespace {

std::vector<TensorRef> present_inputs(const LowerContext& c) {
  std::vector<TensorRef> ins;
  for (size_t i = 0; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? c.input(i) : nullptr);
  return ins;
}

// Ops that are not loop nests run their reference kernel: one extern stage per output.
OpLowering extern_lowering(const std::string& op_type, const std::string& domain = "") {
  return {op_type, domain, [](LowerContext& c) {
            for (size_t i = 0; i < c.num_outputs(); ++i) {
              if (!c.has_output(i)) continue;
              c.set_output(i, extern_stage(c.name(c.num_outputs() > 1 ? "out" + std::to_string(i) : ""), c.node(),
                                           present_inputs(c), static_cast<int>(i), c.out_dtype(i), c.out_shape(i)));
            }
          }};
}

}  // namespace
}  // namespace misc

void register_misc_lowerings(LoweringRegistry& r) {
  using namespace misc;
  // Gaussian elimination with pivoting, greedy suppression, compaction and sorting: data-dependent
  // control flow, not loop nests (the last three are usually folded at compile time anyway).
  r.add(extern_lowering("Det"));
  r.add(extern_lowering("NonMaxSuppression"));
  r.add(extern_lowering("NonZero"));
  r.add(extern_lowering("Unique"));
  // Their bounded forms for inputs known only at run time (frontend/passes/bound_run_time_shapes.h).
  r.add(extern_lowering("NonMaxSuppressionBounded", "kiln"));
  r.add(extern_lowering("NonZeroBounded", "kiln"));
  r.add(extern_lowering("UniqueBounded", "kiln"));
  register_bitcast_lowering(r);
  register_swiglu_lowering(r);
  register_if_merge_lowering(r);
  register_step_loop_lowering(r);
  register_tensor_scatter_lowering(r);
  register_ml_domain_lowerings(r);
  register_training_optimizer_lowerings(r);
  register_sampling_lowerings(r);
  register_signal_lowerings(r);
}

}  // namespace kiln::te
