/// \file What a graph costs to the substitution search (frontend/subst/optimizer.h), read from tuning
/// records: issue 20's point that kiln's substitutions be ranked by kiln's own measured kernels.
///
/// A candidate graph is laid out and split into tasks exactly as compiling it would (pipeline.h's
/// lay_out and laid_out_tasks), and costs the sum over its tasks of occurrences x the best record's
/// mean latency for the target. A task no record has (the merged conv a rewrite creates, before it is
/// tuned) is assumed to run at the rate, in FLOP/s, of the graph's tasks that have records; a graph
/// with none falls back to the roofline. Why the measured rate and not the roofline's peak: a
/// merged task would otherwise look as fast as the machine's peak and win against tuned parts that
/// reach a third of it. Why records at all: tuned convs lose a quarter of their speed at some widths
/// (bench/RESULTS.md, issue 20), which no estimate foresees.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backends/measure/records.h"
#include "frontend/ir/graph.h"
#include "frontend/subst/graph_cost.h"
#include "toolchain/layout_target.h"

namespace kiln {

/// The cost function for `target` (its name, as records name it) laid out for `layout`, from
/// `records` (measure::load_records); a graph none of whose tasks has a record costs its roofline
/// (subst::roofline_for(layout.vector_bits, 1), as the search's own estimates).
std::function<double(const Graph&)> record_graph_costs(const std::vector<measure::Record>& records, const std::string& target,
                                                       LayoutTarget layout);

}  // namespace kiln
