// One stage of a tensor-expression DAG lowered by a GPU stage schedule into a LoweredFunc whose
// parameters are the DAG's placeholders, then its stages (as testing::max_error expects), for the tests
// of the GPU schedules.
#pragma once
#include <functional>
#include <map>

#include "scheduler/lower/lower_dag.h"

namespace kiln::testing {

using StageLowering = std::function<lower::Stmt(const std::map<const te::TensorNode*, lower::BufferRef>& buffers)>;

inline lower::LoweredFunc gpu_stage_kernel(const te::TensorRef& stored, const StageLowering& lower_stage) {
  const te::ComputeDAG dag = te::make_dag({stored});
  std::map<const te::TensorNode*, lower::BufferRef> buffers;
  lower::LoweredFunc f{"k", {}, nullptr, {}};
  for (const te::TensorRef& p : dag.placeholders) {
    f.params.push_back(lower::make_buffer(p->name, p->dtype, num_elements(p->shape)));
    buffers[p.get()] = f.params.back();
  }
  for (const te::TensorRef& t : dag.tensors) {
    f.params.push_back(lower::make_buffer(t->name, t->dtype, num_elements(t->shape)));
    buffers[t.get()] = f.params.back();
  }
  f.body = lower_stage(buffers);
  return f;
}

}  // namespace kiln::testing
