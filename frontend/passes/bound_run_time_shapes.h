/// \file Ops whose output extent is decided at run time, given a bound at compile time.
///
/// Why bounds: kiln compiles static shapes, but NonMaxSuppression, NonZero, Unique and a TopK with a
/// run-time k keep as many results as the data says, and detectors end in them. Such an op becomes its bounded
/// form: the output has the most rows the op can ever produce (NMS: batches x classes x min(boxes,
/// max_output_boxes_per_class); NonZero: every element; Unique: every slice; TopK: the whole axis,
/// sorted), the results first, and a run-time count beside it (kiln.NonMaxSuppressionBounded,
/// kiln.NonZeroBounded and kiln.UniqueBounded run a runtime kernel; TopK sorts the whole axis and its
/// count is min(k, axis)). The bound is exact, so
/// it cannot be exceeded. Graph::run_time_extents records which axis of which value is run-time
/// sized, and inference carries that through the nodes that keep rows apart (element-wise ops, Gather,
/// Slice off the axis, Squeeze, Unsqueeze, Reshape and Transpose that keep the axis, Concat along
/// another axis); any other reader is an error naming it, as its result would mix in rows that are not
/// there. A graph output so sized gets its count as the graph output "<output>.count", which the
/// header names; conformance and `kiln run` keep the counted rows.
#pragma once
#include <cstddef>

#include "frontend/ir/graph.h"

namespace kiln {

/// True for NonMaxSuppression, NonZero or Unique whose inputs are not all constants, and TopK whose k is not.
bool has_run_time_shape(const Node& n, const Graph& g);

/// Replaces g.nodes[index] (has_run_time_shape) by its bounded form, recording its output's extent in
/// g.run_time_extents. The nodes put in place are inferred next.
void bound_run_time_shape(Graph& g, size_t index);

/// After `n` is inferred: the run-time extents of its outputs, from those of its inputs. Throws Error
/// naming `n` when it reads a run-time-sized value in a way that mixes its rows.
void carry_run_time_extents(Graph& g, const Node& n);

/// Adds graph output "<output>.count" for each graph output with a run-time extent
/// (Graph::count_outputs), copied by an Identity appended to g.nodes; once per output, however often
/// inference runs.
void add_count_outputs(Graph& g);

}  // namespace kiln
