/// \file The tasks the records fuzzer replays records on, shared by the fuzz target and its seed maker so
/// the selector byte of an input names the same task in both.
#pragma once
#include <vector>

#include "scheduler/tasks/task.h"

namespace kiln::fuzz {

/// The tasks of kiln's tiny CNN (convs, a pool, a classifier) in the 16-float blocked layout, then a
/// small matmul: the DAG shapes records are written for, at sizes a fuzzer can replay quickly.
/// Built with the frontend passes alone (no LLVM), in a fixed order.
std::vector<Task> record_tasks();

}  // namespace kiln::fuzz
