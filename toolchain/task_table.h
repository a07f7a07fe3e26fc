/// \file `kiln inspect --tasks`: the tuning tasks of a model, largest share of the work first.
#pragma once
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"
#include "scheduler/tasks/task.h"

namespace kiln {

/// One row per task, sorted by weight x FLOPs (ties by key): key, weight, FLOPs per occurrence,
/// weight x FLOPs, share of the total, anchor op and the first occurrence's nodes; then a total line
/// that sets the tasks' FLOPs beside the op-level count `op_flops` (inspect's per-op formulas; left out
/// when negative).
std::string format_task_table(const SubgraphDAG& dag, const std::vector<Task>& tasks, double op_flops = -1);

}  // namespace kiln
