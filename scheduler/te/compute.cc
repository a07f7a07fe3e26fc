#include "scheduler/te/compute.h"

#include <fmt/format.h>

#include <limits>
#include <set>

#include "frontend/ir/error.h"

namespace kiln::te {

const char* reducer_name(Reducer r) {
  switch (r) {
    case Reducer::None: return "none";
    case Reducer::Sum: return "sum";
    case Reducer::Prod: return "prod";
    case Reducer::Min: return "min";
    case Reducer::Max: return "max";
  }
  return "?";
}

int64_t int_max_of(DType t) {
  if (t == DType::Bool) return 1;
  if (t == DType::Int64) return std::numeric_limits<int64_t>::max();
  if (t == DType::UInt64) return -1;  // all bits set
  int bits = static_cast<int>(8 * dtype_size(t));
  return is_signed(t) ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
}

int64_t int_min_of(DType t) {
  if (!is_signed(t)) return 0;
  if (t == DType::Int64) return std::numeric_limits<int64_t>::min();
  return -(int64_t{1} << (8 * dtype_size(t) - 1));
}

Expr reducer_identity(Reducer r, DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Reducer::Sum: return const_of(t, 0);
    case Reducer::Prod: return const_of(t, 1);
    case Reducer::Min:
      if (is_float(t)) return float_imm(inf, t);
      return int_imm(int_max_of(t), t);
    case Reducer::Max:
      if (is_float(t)) return float_imm(-inf, t);
      return int_imm(int_min_of(t), t);
    case Reducer::None: break;
  }
  throw Error("reducer none has no identity");
}

std::vector<TensorRef> Stage::inputs() const {
  if (is_extern()) return extern_inputs;
  std::vector<TensorRef> out;
  std::set<const TensorNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!e) return;
    if (e->op == ExprOp::Load && seen.insert(e->tensor.get()).second) out.push_back(e->tensor);
    for (const Expr& a : e->args) walk(a);
  };
  walk(init);
  walk(body);
  return out;
}

TensorRef placeholder(const std::string& name, DType dtype, Shape shape, std::shared_ptr<const Tensor> constant) {
  auto t = std::make_shared<TensorNode>();
  t->name = name;
  t->dtype = dtype;
  t->shape = std::move(shape);
  t->constant = std::move(constant);
  return t;
}

namespace {
std::vector<Expr> make_vars(const char* prefix, size_t n) {
  std::vector<Expr> v;
  for (size_t i = 0; i < n; ++i) v.push_back(var(prefix + std::to_string(i)));
  return v;
}

TensorRef finish(std::shared_ptr<Stage> s) {
  auto t = std::make_shared<TensorNode>();
  t->name = s->name;
  t->dtype = s->dtype;
  t->shape = s->shape;
  t->stage = std::move(s);
  return t;
}
}  // namespace

TensorRef compute(const std::string& name, const std::string& tag, DType dtype, Shape shape, const IndexFn& f) {
  auto s = std::make_shared<Stage>();
  s->name = name;
  s->tag = tag;
  s->dtype = dtype;
  s->shape = std::move(shape);
  s->axes = make_vars("i", s->shape.size());
  s->body = f(s->axes);
  if (!s->body || s->body->dtype != dtype)
    throw Error(fmt::format("stage '{}': body is {}, stage is {}", name, s->body ? dtype_name(s->body->dtype) : "null",
                            dtype_name(dtype)));
  return finish(std::move(s));
}

TensorRef reduce(const std::string& name, const std::string& tag, DType dtype, Shape shape, Reducer reducer,
                 const std::vector<int64_t>& extents, const ReduceFn& f, Expr init) {
  auto s = std::make_shared<Stage>();
  s->name = name;
  s->tag = tag;
  s->dtype = dtype;
  s->shape = std::move(shape);
  s->axes = make_vars("i", s->shape.size());
  std::vector<Expr> r = make_vars("r", extents.size());
  for (size_t i = 0; i < extents.size(); ++i) s->reduce_axes.push_back({r[i], extents[i]});
  s->reducer = reducer;
  s->init = init ? init : reducer_identity(reducer, dtype);
  s->body = f(s->axes, r);
  if (!s->body || s->body->dtype != dtype || s->init->dtype != dtype)
    throw Error(fmt::format("stage '{}': body/init dtype differs from the stage's {}", name, dtype_name(dtype)));
  return finish(std::move(s));
}

TensorRef extern_stage(const std::string& name, const Node& node, std::vector<TensorRef> inputs, int output,
                       DType dtype, Shape shape) {
  auto s = std::make_shared<Stage>();
  s->name = name;
  s->tag = "extern";
  s->dtype = dtype;
  s->shape = std::move(shape);
  s->extern_node = std::make_shared<const Node>(node);
  s->extern_inputs = std::move(inputs);
  s->extern_output = output;
  return finish(std::move(s));
}

Expr at(const TensorRef& t, std::vector<Expr> idx) { return load(t, std::move(idx)); }

ComputeDAG make_dag(const std::vector<TensorRef>& outputs) {
  ComputeDAG dag;
  dag.outputs = outputs;
  std::set<const TensorNode*> visited;
  std::function<void(const TensorRef&)> visit = [&](const TensorRef& t) {
    if (!visited.insert(t.get()).second) return;
    if (!t->stage) {
      dag.placeholders.push_back(t);
      return;
    }
    for (const TensorRef& in : t->stage->inputs()) visit(in);
    dag.tensors.push_back(t);
  };
  for (const TensorRef& o : outputs) visit(o);
  return dag;
}

std::string print_dag(const ComputeDAG& dag) {
  std::string out;
  for (const TensorRef& p : dag.placeholders)
    out += fmt::format("{} = placeholder({}, {}){}\n", p->name, dtype_name(p->dtype), shape_str(p->shape),
                       p->constant ? " const" : "");
  for (const TensorRef& t : dag.tensors) {
    const Stage& s = *t->stage;
    std::string lhs = s.name + "[";
    for (size_t i = 0; i < s.axes.size(); ++i) lhs += (i ? ", " : "") + s.axes[i]->name;
    lhs += "]";
    if (s.is_extern()) {
      out += fmt::format("{} = extern {}#{} ({}, {})\n", lhs, s.extern_node->op_type, s.extern_output,
                         dtype_name(s.dtype), shape_str(s.shape));
      continue;
    }
    if (s.reducer == Reducer::None) {
      out += fmt::format("{} = {}\n", lhs, print_expr(s.body));
      continue;
    }
    std::string r;
    for (const auto& iv : s.reduce_axes) r += fmt::format("{}{}: {}", r.empty() ? "" : ", ", iv.var->name, iv.extent);
    out += fmt::format("{} = {}({}; init {}) {}\n", lhs, reducer_name(s.reducer), r, print_expr(s.init), print_expr(s.body));
  }
  return out;
}

}  // namespace kiln::te
