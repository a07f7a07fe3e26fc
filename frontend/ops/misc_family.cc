// The misc family's entry point: ops that belong to no other family, each in a file named for it
// (det_op.cc, bitcast_op.cc, swiglu_op.cc, tensor_scatter_op.cc, ml_domain_ops.cc,
// training_optimizer_ops.cc, sampling_ops.cc, value_dependent_ops.cc).
#include "frontend/ops/misc_family.h"

namespace kiln {

void register_misc_ops(OpRegistry& r) {
  using namespace misc;
  register_det_op(r);
  register_bitcast_op(r);
  register_swiglu_op(r);
  register_if_merge_op(r);
  register_step_loop_op(r);
  register_tensor_scatter_op(r);
  register_ml_domain_ops(r);
  register_training_optimizer_ops(r);
  register_sampling_ops(r);
  register_dynamic_shape_ops(r);
}

}  // namespace kiln
