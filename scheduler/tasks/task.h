/// \file Tuning tasks: the distinct subgraphs of a model, each with how often it occurs.
///
/// Ansor tunes each distinct subgraph once and weights its latency by its occurrence count; the task
/// scheduler spends its trials by weight x latency. A task is identified by its workload key
/// (workload_key.h), so identical layers of one model (ResNet's repeated blocks) and of different
/// models share tuning work and records.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"
#include "scheduler/te/compute.h"

namespace kiln {

struct Task {
  std::string key;              // workload key: 16 hex digits
  std::string canonical;        // the canonical DAG text the key hashes
  te::ComputeDAG dag;           // of the first occurrence
  std::vector<int> subgraphs;   // ids of every occurrence (step_loop_partition.h numbers loop bodies'), ascending
  int weight = 0;               // runs an inference: occurrences, those in a loop's body once per iteration
  double flops = 0;             // per occurrence (dag_flops.h)
  std::string anchor;           // the first occurrence's anchor op type ("Conv", "MatMul", "Relu")
  std::vector<std::string> node_names;  // of the first occurrence
};

/// One task per distinct workload key, in order of first occurrence: the model's subgraphs, then those
/// of its loops' bodies (frontend/partition/step_loop_partition.h). Lowers every subgraph but those at
/// the positions in `runs_no_code` (in-place Concats: nothing to tune) and the loops themselves;
/// throws Unsupported for an op without a lowering.
std::vector<Task> extract_tasks(const Graph& g, const SubgraphDAG& dag, const std::set<int>& runs_no_code = {});

}  // namespace kiln
