/// \file The workload key: which subgraphs are the same tuning problem.
///
/// Two subgraphs are one task when their compute DAGs are the same computation on the same shapes,
/// whatever their nodes, tensors and values were called and in whatever order the graph listed them.
/// The canonical print is print_dag's content with every name replaced by a position:
///  - outputs are ordered by their own canonical print, then the DAG is walked from them as make_dag
///    does (operands in expression order), so placeholders are p0, p1, ... and stages s0, s1, ... in
///    an order the structure alone determines; loop variables are already positional (i*, r*);
///  - placeholders keep dtype and shape; constant ones are marked "const" but their values are left
///    out, so layers that differ only in weights share a key (Ansor's rule: weights are run-time
///    data to a schedule);
///  - each stage keeps its tag, dtype, shape, reducer, init and body; extern stages keep the op,
///    its domain, the output index and the attributes.
#pragma once
#include <string>

#include "scheduler/te/compute.h"

namespace kiln {

/// The canonical text of a DAG (one line per placeholder and stage, then the outputs).
std::string canonical_dag_text(const te::ComputeDAG& dag);

/// FNV-1a 64 of `text`, as 16 lower-case hex digits.
std::string fnv1a64_hex(const std::string& text);

/// fnv1a64_hex(canonical_dag_text(dag)).
std::string workload_key(const te::ComputeDAG& dag);

}  // namespace kiln
