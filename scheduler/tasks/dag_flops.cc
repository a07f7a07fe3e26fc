#include "scheduler/tasks/dag_flops.h"

namespace kiln {

namespace {

using te::Expr;
using te::ExprOp;

bool is_free(ExprOp op) {
  return op == ExprOp::IntImm || op == ExprOp::FloatImm || op == ExprOp::Var || op == ExprOp::Cast || op == ExprOp::Reinterpret ||
         op == ExprOp::Select;
}

// Arithmetic operations in one evaluation of `e`; a load's indices are addressing and not counted.
double body_ops(const Expr& e) {
  if (!e || e->op == ExprOp::Load) return 0;
  double n = 0;
  if (!is_free(e->op)) {
    DType operand = e->args.at(0)->dtype;
    if (operand != DType::Int64 && operand != DType::Bool) n = 1;
  }
  for (const Expr& a : e->args) n += body_ops(a);
  return n;
}

double elements(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

}  // namespace

double stage_flops(const te::Stage& s) {
  if (s.is_extern()) return 0;
  double reduction = 1;
  for (const auto& iv : s.reduce_axes) reduction *= static_cast<double>(iv.extent);
  double ops = body_ops(s.body) + (s.reducer == te::Reducer::None ? 0 : 1);
  return elements(s.shape) * reduction * ops;
}

double dag_flops(const te::ComputeDAG& dag) {
  double total = 0;
  for (const te::TensorRef& t : dag.tensors) total += stage_flops(*t->stage);
  return total;
}

}  // namespace kiln
