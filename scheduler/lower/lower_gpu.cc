#include "scheduler/lower/lower_gpu.h"

#include "frontend/ir/error.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {

namespace {

Expr flat_index(const std::vector<Expr>& idx, const Shape& shape) {
  Expr f = te::int_imm(0);
  for (size_t k = 0; k < idx.size(); ++k) f = f * shape[k] + idx[k];
  return f;
}

// `s` with the variables of `m` replaced in every expression it holds (loop variables are not in `m`).
Stmt substitute_stmt(const Stmt& s, const std::map<const te::ExprNode*, Expr>& m) {
  if (!s) return s;
  auto sub = [&](const Expr& e) { return e ? te::substitute(e, m) : e; };
  auto n = std::make_shared<StmtNode>(*s);
  n->index = sub(s->index);
  n->value = sub(s->value);
  n->cond = sub(s->cond);
  for (Stmt& b : n->body) b = substitute_stmt(b, m);
  return n;
}

}  // namespace

Stmt over_gpu_threads(const Expr& var, int64_t n, const Stmt& body, const GpuScheduleParams& p) {
  const int64_t threads = n >= p.threads_per_block ? p.threads_per_block : std::max<int64_t>(32, (n + 31) / 32 * 32);
  const int64_t blocks = (n + threads - 1) / threads;
  Expr bx = te::var(var->name + ".block"), tx = te::var(var->name + ".thread");
  Expr flat = bx * threads + tx;
  Stmt inner = substitute_stmt(body, {{var.get(), flat}});
  if (blocks * threads != n) inner = if_then_else(flat < te::int_imm(n), inner);
  return for_loop(bx, blocks, ForKind::GpuBlock, for_loop(tx, threads, ForKind::GpuThread, inner));
}

Stmt lower_stage_gpu(const te::TensorRef& t, const std::map<const te::TensorNode*, BufferRef>& buffers,
                     const GpuScheduleParams& p, const Epilogue* epilogue) {
  const te::Stage& s = *t->stage;
  if (s.is_extern()) throw Unsupported("stage '" + s.name + "': op " + s.tag + " has no GPU kernel yet");
  const int64_t total = num_elements(s.shape);
  if (total == 0) return block({});
  const BufferRef& out = buffers.at(epilogue ? epilogue->out.get() : t.get());
  // The element a thread computes: its flat index f, and each axis recovered from it.
  Expr f = te::var(s.name + ".i");
  std::map<const te::ExprNode*, Expr> axis_of_f;
  int64_t stride = total;
  for (size_t k = 0; k < s.axes.size(); ++k) {
    stride /= s.shape[k];
    Expr a = stride == 1 ? f : te::floordiv(f, te::int_imm(stride));
    axis_of_f[s.axes[k].get()] = k == 0 ? a : te::floormod(a, te::int_imm(s.shape[k]));
  }
  Expr body = flatten_loads(s.body, buffers);
  Stmt element;
  if (s.reducer == te::Reducer::None) {
    element = store(out, flat_index(s.axes, s.shape), body);
  } else {
    BufferRef acc = make_buffer(s.name + ".acc", s.dtype, 1, true);
    Expr a = load(acc, te::int_imm(0));
    Stmt step = store(acc, te::int_imm(0), combine_reduction(s.reducer, a, body));
    for (size_t k = s.reduce_axes.size(); k-- > 0;)
      step = for_loop(s.reduce_axes[k].var, s.reduce_axes[k].extent, ForKind::Serial, step);
    Expr result = epilogue ? te::substitute(flatten_loads(epilogue->expr, buffers), {{epilogue->value.get(), a}}) : a;
    element = allocate(acc, block({store(acc, te::int_imm(0), flatten_loads(s.init, buffers)), step,
                                   store(out, flat_index(s.axes, s.shape), result)}));
  }
  return over_gpu_threads(f, total, substitute_stmt(element, axis_of_f), p);
}

SubgraphScheduler gpu_subgraph_scheduler(const GpuScheduleParams& p) {
  return [p](const LoweredSubgraph& sg, int, const std::map<const te::TensorNode*, BufferRef>& buffers,
             std::vector<BufferRef>& temporaries) {
    std::map<const te::TensorNode*, BufferRef> all = buffers;
    const EpiloguePlan epilogues = plan_epilogues(sg.dag);
    for (const te::TensorRef& t : sg.dag.tensors) {
      if (all.count(t.get()) || epilogues.computed_inside.count(t.get())) continue;
      BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
      all[t.get()] = b;
      temporaries.push_back(b);
    }
    std::vector<Stmt> stages;
    for (size_t i = 0; i < sg.dag.tensors.size(); ++i) {
      const te::TensorRef& t = sg.dag.tensors[i];
      auto e = epilogues.by_stage.find(i);
      if (e != epilogues.by_stage.end()) stages.push_back(lower_stage_gpu(t, all, p, &e->second));
      else if (!epilogues.chain_members.count(t.get())) stages.push_back(lower_stage_gpu(t, all, p));
    }
    return block(std::move(stages));
  };
}

Stmt gpu_kernels_only(const Stmt& model_body, const GpuScheduleParams& p) {
  std::vector<Stmt> stmts = model_body && model_body->kind == StmtKind::Block ? model_body->body : std::vector<Stmt>{model_body};
  for (Stmt& s : stmts) {
    if (!s || (s->kind == StmtKind::Block && s->body.empty())) continue;
    if (s->kind == StmtKind::For && s->for_kind == ForKind::GpuBlock) continue;
    if (s->kind == StmtKind::For && s->body[0] && s->body[0]->kind == StmtKind::Store) {
      s = over_gpu_threads(s->var, s->extent, s->body[0], p);
      continue;
    }
    throw Error("GPU lowering: a statement of the model is neither a kernel nor a plain copy loop:\n" + print_stmt(s));
  }
  return block(std::move(stmts));
}

}  // namespace kiln::lower
