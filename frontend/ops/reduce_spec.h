/// \file What a Reduce* node computes: its kind (one table from op name to kind) and the axes it
/// reduces. Shape inference and the reference kernel (reduction_ops.cc) and the TE lowering
/// (scheduler/te/ops/reduction_lowering.cc) all read these, so the list of Reduce* ops and their
/// per-opset axes rules exist once.
#pragma once
#include <cstdint>
#include <vector>

#include "frontend/ops/op_registry.h"

namespace kiln {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

/// One Reduce* op and the reduction it performs.
struct ReduceOp {
  const char* op_type;
  ReduceKind kind;
};
/// Every Reduce* op kiln supports (ArgMax and ArgMin reduce to an index and are not listed).
const std::vector<ReduceOp>& reduce_ops();

/// ReduceSum took its axes from an attribute before opset 13, the other Reduce* ops before opset 18;
/// from then on axes is an optional second input.
bool reduce_axes_from_input(const Node& node, ReduceKind kind);

/// The axes a Reduce* node reduces.
struct ReduceAxes {
  bool noop = false;           // noop_with_empty_axes with no axes: the output is the input
  std::vector<bool> reduced;   // per input axis
  bool keepdims = true;        // reduced axes stay as extent 1
};

/// Parses axes (attribute or `axes_input`, the value of input 1 or nullptr when absent),
/// noop_with_empty_axes and keepdims for an input of rank `rank`; fails on a malformed axes tensor, an
/// axis out of range or listed twice.
ReduceAxes reduce_axes(const Node& node, ReduceKind kind, const Tensor* axes_input, int64_t rank);

}  // namespace kiln
