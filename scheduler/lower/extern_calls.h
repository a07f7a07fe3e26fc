/// \file How an op that lowers to extern stages calls its runtime kernel (runtime/kernels/*.c): the
/// kernel's C symbol, its arguments and the scratch memory it needs. One table for lower_dag, so the
/// knowledge of each kernel's parameter list lives beside nothing else.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "scheduler/lower/loop_ir.h"
#include "scheduler/te/compute.h"

namespace kiln::lower {

/// One call computing every output of a node. `args` are in the kernel's parameter order (a null
/// entry for an output the model does not use). A kernel that `takes_scratch` gets one more pointer
/// after `args`: a workspace buffer of `scratch_bytes`, or null when that is 0
/// (runtime/kernels/kiln_rt_kernels.h).
struct ExternCallSpec {
  std::string callee;
  std::vector<BufferRef> args;
  std::vector<int64_t> int_args;
  bool takes_scratch = false;
  int64_t scratch_bytes = 0;
};

/// The call for `node`: `inputs` are its extern stages' inputs (null where absent), `outputs[i]` the
/// stage computing output i (null when the DAG does not need it), `buffers` every tensor's buffer.
/// Throws Unsupported for ops without a runtime kernel (NonZero, NonMaxSuppression and Unique on
/// run-time inputs run as their bounded forms; on constants they fold away).
ExternCallSpec extern_call_spec(const Node& node, const std::vector<te::TensorRef>& inputs,
                                const std::vector<te::TensorRef>& outputs,
                                const std::map<const te::TensorNode*, BufferRef>& buffers);

}  // namespace kiln::lower
