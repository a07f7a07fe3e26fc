#include "scheduler/lower/legalize_loops.h"

namespace kiln::lower {

bool is_vectorizable_body(const Stmt& s) {
  if (!s) return true;
  switch (s->kind) {
    case StmtKind::Store: return true;
    case StmtKind::Block:
    case StmtKind::IfThenElse:
      for (const Stmt& b : s->body)
        if (!is_vectorizable_body(b)) return false;
      return true;
    default: return false;
  }
}

namespace {

Stmt legalize(const Stmt& s, bool in_parallel) {
  if (!s) return s;
  if (s->kind == StmtKind::Store || s->kind == StmtKind::ExternCall || s->kind == StmtKind::Prefetch ||
      s->kind == StmtKind::Barrier)
    return s;
  auto copy = std::make_shared<StmtNode>(*s);
  bool inner_parallel = in_parallel;
  if (s->kind == StmtKind::For) {
    if (copy->for_kind == ForKind::Parallel && in_parallel) copy->for_kind = ForKind::Serial;
    if (copy->for_kind == ForKind::Vectorized && !is_vectorizable_body(s->body[0])) copy->for_kind = ForKind::Serial;
    if (copy->for_kind == ForKind::Parallel || copy->for_kind == ForKind::Vectorized) inner_parallel = true;
  }
  for (Stmt& b : copy->body) b = legalize(b, inner_parallel);
  return copy;
}

}  // namespace

Stmt legalize_loop_kinds(const Stmt& s) { return legalize(s, false); }

}  // namespace kiln::lower
