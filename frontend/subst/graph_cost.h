/// \file What a graph costs to run, as the substitution search compares graphs (issue 20, point 5).
///
/// A roofline estimate per run-time node: the larger of its arithmetic at the machine's peak and its
/// memory traffic at the machine's bandwidth, plus a fixed cost per node (a kernel's start and its
/// loop nest). Why a roofline and not the tuner's records yet: a rewrite's new operators (a merged
/// conv) have no records until they are tuned, and the search must still rank them; reading the
/// records database for the tasks that have one is the next step (docs/subst.md). The estimate only
/// ranks graphs of one model on one target against each other; it predicts no absolute time.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln::subst {

struct Roofline {
  double flops_per_second = 0;  // the machine's fp32 FMA peak, all cores
  double bytes_per_second = 0;  // its memory bandwidth
  double seconds_per_node = 0;  // fixed cost of one kernel
  // The channel block of the layout stage (frontend/layout/block_layout.h), 0 without one: a channel
  // Slice of a feature map stays on the blocks only when it starts at a block.
  int64_t channel_block = 0;
};

/// A roofline for `cores` cores with vectors of `vector_bits` (2 FMA pipes at 3 GHz, 10 GB/s per core,
/// 1 us per kernel: typical of the x86 and AArch64 server cores kiln targets; only ratios matter),
/// and the channel block the layout stage uses with those vectors.
Roofline roofline_for(int vector_bits, int cores);

/// Estimated seconds for one run of `g`: the sum over its nodes that run at run time (nodes whose
/// inputs are all constants or computed from constants alone, and shape-only ops, cost nothing).
double graph_cost(const Graph& g, const Roofline& r);

/// graph_cost with the Slices whose outputs are in `moved_slices` free: their readers only reshape
/// or move data (Reshape, Transpose, ...), and kiln fuses a Slice into that pass (partition.h's
/// injective chains). graph_cost(g, r) finds them in g itself.
/// `folded`: values g reads that some other graph computes from constants alone (a kernel sum the
/// search leaves unfolded), which fold before run time as initializers do.
double graph_cost(const Graph& g, const Roofline& r, const std::set<std::string>& moved_slices,
                  const std::set<std::string>& folded = {});

/// The values of g computed from constants alone by its nodes: folded before run time.
std::set<std::string> values_of_constants(const Graph& g);

/// The element-wise ops a conv's or matmul's epilogue takes in (Relu, Add, Mul, Clip, ...).
bool is_elementwise(const Node& n);

/// Reshape, Transpose, Flatten, Squeeze, Unsqueeze, Slice: ops a Slice before them fuses into.
bool reshapes_or_moves(const std::string& op_type);

/// The Slices of g read only by reshapes and moves.
std::set<std::string> slices_read_by_moves(const Graph& g);

/// The part of graph_cost(g, r) that `nodes` (nodes of g) make up, if `slice_outputs` are the values
/// Slices make that they read (a Concat of one copies; otherwise it may run in place) and
/// `fused_values` those computed in a conv's or matmul's epilogue (epilogue_values).
double nodes_cost(const Graph& g, const std::vector<const Node*>& nodes, const Roofline& r,
                  const std::set<std::string>& slice_outputs = {}, const std::set<std::string>& fused_values = {});

/// The values of g a conv or matmul computes in its epilogue: its output and the element-wise chain
/// after it (partition.h's phase 0 fuses them into its kernel).
std::set<std::string> epilogue_values(const Graph& g);

}  // namespace kiln::subst
