#include "frontend/ops/reduce_spec.h"

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln {

const std::vector<ReduceOp>& reduce_ops() {
  static const std::vector<ReduceOp> ops = {
      {"ReduceSum", ReduceKind::Sum},         {"ReduceMean", ReduceKind::Mean},
      {"ReduceMax", ReduceKind::Max},         {"ReduceMin", ReduceKind::Min},
      {"ReduceProd", ReduceKind::Prod},       {"ReduceL1", ReduceKind::L1},
      {"ReduceL2", ReduceKind::L2},           {"ReduceLogSum", ReduceKind::LogSum},
      {"ReduceLogSumExp", ReduceKind::LogSumExp}, {"ReduceSumSquare", ReduceKind::SumSquare},
  };
  return ops;
}

bool reduce_axes_from_input(const Node& node, ReduceKind kind) {
  return node.opset >= (kind == ReduceKind::Sum ? 13 : 18);
}

ReduceAxes reduce_axes(const Node& node, ReduceKind kind, const Tensor* axes_input, int64_t rank) {
  std::vector<int64_t> axes;
  if (reduce_axes_from_input(node, kind)) {
    if (axes_input) {
      if (!is_integer(axes_input->dtype()) || axes_input->rank() > 1)
        throw Error(node.label() + ": 'axes' must be a 1-D integer tensor, got " + dtype_name(axes_input->dtype()) +
                    " " + shape_str(axes_input->shape()));
      axes = axes_input->to_ints();
    }
  } else {
    axes = node.attr_ints("axes");
  }
  ReduceAxes r;
  r.keepdims = node.attr_int("keepdims", 1) != 0;
  r.reduced.assign(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    // noop_with_empty_axes exists only where axes is an input; attribute versions always reduce all.
    if (reduce_axes_from_input(node, kind) && node.attr_int("noop_with_empty_axes", 0) != 0) {
      r.noop = true;
      return r;
    }
    r.reduced.assign(static_cast<size_t>(rank), true);
  }
  for (int64_t a : axes) {
    int64_t axis = normalize_axis(node, a, rank);
    if (rank == 0) continue;  // a scalar has nothing to reduce: axis 0/-1 is accepted as a no-op
    if (r.reduced[axis]) throw Error(node.label() + ": axis " + std::to_string(a) + " is listed twice in 'axes'");
    r.reduced[axis] = true;
  }
  return r;
}

}  // namespace kiln
