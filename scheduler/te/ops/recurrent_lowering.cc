// LSTM, GRU and RNN as tensor expressions: the node's expansion (frontend/passes/expand_recurrent.h)
// lowered node by node, steps unrolled. The compile pipeline expands these nodes in the graph before
// partitioning, so their MatMuls become tasks of their own; this lowering serves whoever lowers a
// graph that still has them (the te engine), with the same expansion, so both compute the same thing.
#include "frontend/passes/expand_recurrent.h"
#include "scheduler/te/ops/nn_lowering_common.h"
#include "scheduler/te/ops/rewritten_lowering.h"

namespace kiln::te::nn_lower {
namespace {

void lower_recurrent(LowerContext& c) {
  lower_through_rewrite(c, [](Graph& g) { expand_recurrent(g); });
}

}  // namespace

void register_recurrent_lowerings(LoweringRegistry& r) {
  for (const char* type : {"LSTM", "GRU", "RNN"}) r.add({type, "", lower_recurrent});
}

}  // namespace kiln::te::nn_lower
