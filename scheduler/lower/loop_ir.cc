#include "scheduler/lower/loop_ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/ir/error.h"
#include "scheduler/te/compute.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {

BufferRef make_buffer(const std::string& name, DType dtype, int64_t size, bool local) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = dtype;
  b->size = size;
  b->local = local;
  b->node = te::placeholder(name, dtype, Shape{size});
  return b;
}

Expr load(const BufferRef& b, const Expr& index) { return te::load(b->node, {index}); }

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial: return "for";
    case ForKind::Parallel: return "parallel for";
    case ForKind::Vectorized: return "vectorized for";
    case ForKind::Unrolled: return "unrolled for";
    case ForKind::GpuBlock: return "blockIdx.x for";
    case ForKind::GpuThread: return "threadIdx.x for";
  }
  return "?";
}

namespace {
std::shared_ptr<StmtNode> node(StmtKind k) {
  auto n = std::make_shared<StmtNode>();
  n->kind = k;
  return n;
}
}  // namespace

Stmt for_loop(const Expr& var, int64_t extent, ForKind kind, Stmt body) {
  if (var->op != te::ExprOp::Var) throw Error("loop IR: for over a non-variable");
  auto n = node(StmtKind::For);
  n->var = var;
  n->extent = extent;
  n->for_kind = kind;
  n->body = {std::move(body)};
  return n;
}

Stmt store(const BufferRef& b, const Expr& index, const Expr& value) {
  if (value->dtype != b->dtype)
    throw Error("loop IR: storing " + dtype_name(value->dtype) + " into " + b->name + " of " + dtype_name(b->dtype));
  auto n = node(StmtKind::Store);
  n->buffer = b;
  n->index = index;
  n->value = value;
  return n;
}

Stmt allocate(const BufferRef& b, Stmt body) {
  auto n = node(StmtKind::Allocate);
  n->buffer = b;
  n->body = {std::move(body)};
  return n;
}

Stmt if_then_else(const Expr& cond, Stmt then_case, Stmt else_case) {
  auto n = node(StmtKind::IfThenElse);
  n->cond = cond;
  n->body = {std::move(then_case), std::move(else_case)};
  return n;
}

Stmt block(std::vector<Stmt> stmts) {
  auto n = node(StmtKind::Block);
  n->body = std::move(stmts);
  return n;
}

Stmt extern_call(const std::string& callee, std::vector<BufferRef> args, std::vector<int64_t> int_args) {
  if (callee.empty()) throw Error("loop IR: extern call without a callee");
  auto n = node(StmtKind::ExternCall);
  n->callee = callee;
  n->args = std::move(args);
  n->int_args = std::move(int_args);
  return n;
}

Stmt prefetch(const BufferRef& b, const Expr& index) {
  auto n = node(StmtKind::Prefetch);
  n->buffer = b;
  n->index = index;
  return n;
}

Stmt barrier() { return node(StmtKind::Barrier); }

Stmt map_exprs(const Stmt& s, const std::function<Expr(const Expr&)>& f) {
  if (!s) return s;
  auto n = std::make_shared<StmtNode>(*s);
  for (Expr* e : {&n->index, &n->value, &n->cond})
    if (*e) *e = f(*e);
  for (Stmt& b : n->body) b = map_exprs(b, f);
  return n;
}

Stmt substitute_stmt(const Stmt& s, const std::map<const te::ExprNode*, Expr>& m) {
  return map_exprs(s, [&](const Expr& e) { return te::substitute(e, m); });
}

std::string print_stmt(const Stmt& s, int indent) {
  std::string pad(static_cast<size_t>(indent) * 2, ' ');
  if (!s) return "";
  switch (s->kind) {
    case StmtKind::For:
      return fmt::format("{}{} {} in 0..{}:\n{}", pad, for_kind_name(s->for_kind), s->var->name, s->extent,
                         print_stmt(s->body[0], indent + 1));
    case StmtKind::Store:
      return fmt::format("{}{}[{}] = {}\n", pad, s->buffer->name, te::print_expr(s->index), te::print_expr(s->value));
    case StmtKind::Allocate: {
      const char* scope = s->buffer->scope == BufferScope::GpuShared      ? "shared "
                          : s->buffer->scope == BufferScope::GpuPerThread ? "per-thread "
                                                                          : "";
      return fmt::format("{}allocate {}{}: {}[{}]\n{}", pad, scope, s->buffer->name, dtype_name(s->buffer->dtype),
                         s->buffer->size, print_stmt(s->body[0], indent));
    }
    case StmtKind::Barrier: return pad + "barrier\n";
    case StmtKind::IfThenElse: {
      std::string out = fmt::format("{}if {}:\n{}", pad, te::print_expr(s->cond), print_stmt(s->body[0], indent + 1));
      if (s->body[1]) out += pad + "else:\n" + print_stmt(s->body[1], indent + 1);
      return out;
    }
    case StmtKind::Block: {
      std::string out;
      for (const Stmt& b : s->body) out += print_stmt(b, indent);
      return out;
    }
    case StmtKind::Prefetch: return fmt::format("{}prefetch {}[{}]\n", pad, s->buffer->name, te::print_expr(s->index));
    case StmtKind::ExternCall: {
      std::vector<std::string> bufs;
      for (const BufferRef& b : s->args) bufs.push_back(b ? b->name : "null");
      return fmt::format("{}call {}({}; {})\n", pad, s->callee, fmt::join(bufs, ", "), fmt::join(s->int_args, ", "));
    }
  }
  return "";
}

std::string print_func(const LoweredFunc& f, bool number_statements) {
  std::string out = "func " + f.name + "(";
  for (size_t i = 0; i < f.params.size(); ++i)
    out += fmt::format("{}{}: {}[{}]", i ? ", " : "", f.params[i]->name, dtype_name(f.params[i]->dtype), f.params[i]->size);
  out += "):\n";
  if (!number_statements || !f.body || f.body->kind != StmtKind::Block) return out + print_stmt(f.body, 1);
  for (size_t i = 0; i < f.body->body.size(); ++i) out += fmt::format("  # s{}\n{}", i, print_stmt(f.body->body[i], 1));
  return out;
}

}  // namespace kiln::lower
