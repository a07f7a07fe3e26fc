/// \file Tensors, stages and compute DAGs: what an op's computation is, independent of any loop order.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "scheduler/te/expr.h"

namespace kiln::te {

/// How a reduction stage combines its steps.
enum class Reducer { None, Sum, Prod, Min, Max };
const char* reducer_name(Reducer r);
/// The identity of a reducer in a dtype (0, 1, +largest, -largest; infinities for floats).
Expr reducer_identity(Reducer r, DType t);
/// Largest and smallest value of an integer dtype (uint64's largest is returned as its bit pattern, -1).
int64_t int_max_of(DType t);
int64_t int_min_of(DType t);

struct IterVar {
  Expr var;
  int64_t extent;
};

struct TensorNode;
using TensorRef = std::shared_ptr<const TensorNode>;

/// One stage: out[axes] = reduce_{reduce_axes} body, or out[axes] = body when reducer is None.
/// An extern stage has no body: its values come from a runtime kernel (ops that are not loop nests,
/// e.g. TopK); `extern_node` is the op it computes, reading `extern_inputs`.
struct Stage {
  std::string name;
  std::string tag;  // "elementwise", "broadcast", "injective", "reduction", "conv", "matmul", "pool", "extern"
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<Expr> axes;  // one Int64 Var per output dimension
  std::vector<IterVar> reduce_axes;
  Reducer reducer = Reducer::None;
  Expr init;  // start value of a reduction (the reducer's identity unless an op needs another)
  Expr body;
  std::shared_ptr<const Node> extern_node;
  std::vector<TensorRef> extern_inputs;
  int extern_output = 0;

  bool is_extern() const { return extern_node != nullptr; }
  bool is_reduction() const { return reducer != Reducer::None || !reduce_axes.empty(); }
  /// The tensors this stage reads.
  std::vector<TensorRef> inputs() const;
};

/// A tensor: a placeholder (graph input or constant weight) or the output of a stage.
struct TensorNode {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  std::shared_ptr<const Stage> stage;      // null for placeholders
  std::shared_ptr<const Tensor> constant;  // set for constant placeholders
};

TensorRef placeholder(const std::string& name, DType dtype, Shape shape,
                      std::shared_ptr<const Tensor> constant = nullptr);

using IndexFn = std::function<Expr(const std::vector<Expr>& idx)>;
using ReduceFn = std::function<Expr(const std::vector<Expr>& idx, const std::vector<Expr>& ridx)>;

/// out[idx] = f(idx). The body's dtype must be `dtype`.
TensorRef compute(const std::string& name, const std::string& tag, DType dtype, Shape shape, const IndexFn& f);
/// out[idx] = reducer over ridx in [0, extents) of f(idx, ridx), starting from `init` (identity if null).
TensorRef reduce(const std::string& name, const std::string& tag, DType dtype, Shape shape, Reducer reducer,
                 const std::vector<int64_t>& extents, const ReduceFn& f, Expr init = nullptr);
/// A runtime-kernel stage for output `output` of `node`.
TensorRef extern_stage(const std::string& name, const Node& node, std::vector<TensorRef> inputs, int output,
                       DType dtype, Shape shape);

/// t[idx...]
Expr at(const TensorRef& t, std::vector<Expr> idx);

/// The stages a set of outputs depends on, in topological order, plus the placeholders they read.
struct ComputeDAG {
  std::vector<TensorRef> placeholders;
  std::vector<TensorRef> tensors;  // stage outputs, producers before consumers
  std::vector<TensorRef> outputs;
};
ComputeDAG make_dag(const std::vector<TensorRef>& outputs);

/// One line per stage: "name[i0, i1] = sum(r0: 3) body". Placeholders list their shapes.
std::string print_dag(const ComputeDAG& dag);

}  // namespace kiln::te
