/// \file The tasks to tune so that the substitution search can be ranked by measured latencies
/// (issue 20, point 5: "the option to tune the tasks a rewrite creates").
///
/// `kiln compile --subst --records R` prices each graph by R's latencies for its tasks
/// (subst_costs.h); a task with no record is priced at the rate of those with one, a guess. A
/// rewrite's new tasks (a merged conv) have records only if someone tuned them, and tuning only the
/// graph after every rewrite leaves the tasks the rewrites replaced without records, so the search
/// could not weigh one against the other. `kiln tune --subst` therefore tunes both: the model's tasks
/// without substitutions and those of the graph after each rewrite the roofline search keeps, each
/// prefix of its log replayed, so every rewrite the search may take or refuse has both sides measured.
/// With records already there, the search ranked by them may keep other rewrites (whose new tasks it
/// priced by a guess): their steps are added too, so tuning again with the same records file measures
/// what the last search guessed, until the records-ranked search keeps only measured rewrites.
#pragma once
#include <functional>
#include <vector>

#include "frontend/ir/graph.h"
#include "scheduler/tasks/task.h"
#include "toolchain/layout_target.h"

namespace kiln {

/// The tasks of `model` (a loaded graph) for `target` without substitutions and
/// after each step of the substitution search's log, once per key; a task's weight is the most
/// occurrences it has in any one of those graphs (they are alternatives, not parts of one model).
/// With `record_costs` (subst_costs.h), the steps of the search ranked by them as well.
std::vector<Task> subst_variant_tasks(const Graph& model, LayoutTarget target,
                                      const std::function<double(const Graph&)>& record_costs = {});

}  // namespace kiln
