#include "scheduler/lower/lower_dag.h"

#include "frontend/ir/error.h"
#include "scheduler/lower/extern_calls.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

using te::ExprOp;


Expr flat_index(const std::vector<Expr>& idx, const Shape& shape) {
  if (idx.empty()) return te::int_imm(0);
  Expr flat = idx[0];
  for (size_t k = 1; k < idx.size(); ++k) flat = flat * shape[k] + idx[k];
  return flat;
}

int lanes_for(DType t, const ScheduleParams& p) {
  size_t bytes = std::max<size_t>(dtype_size(t), 1);
  if (t == DType::Float16 || t == DType::BFloat16) bytes = 4;  // computed in float32
  return std::max(1, static_cast<int>(p.vector_bits / 8 / bytes));
}



// Extern stages of one node: the same op writing the same outputs from the same inputs. Stages hold
// copies of the node, so identity is by content; output names are unique in a graph.
bool same_extern_node(const te::Stage& a, const te::Stage& b) {
  return a.extern_node->op_type == b.extern_node->op_type && a.extern_node->domain == b.extern_node->domain &&
         a.extern_node->outputs == b.extern_node->outputs && a.extern_inputs == b.extern_inputs;
}

// The call for the extern stages `group` (stage indices of one node, the first being the call's position).
Stmt lower_extern_group(const te::ComputeDAG& dag, const std::vector<size_t>& group,
                        const std::map<const te::TensorNode*, BufferRef>& buffers, std::vector<ScratchBuffer>& scratch) {
  const te::Stage& first = *dag.tensors[group[0]]->stage;
  std::vector<te::TensorRef> outputs(first.extern_node->outputs.size());
  for (size_t i : group) {
    const te::TensorRef& t = dag.tensors[i];
    auto o = static_cast<size_t>(t->stage->extern_output);
    if (o >= outputs.size()) throw Error("stage '" + t->name + "': extern output out of range");
    outputs[o] = t;
  }
  ExternCallSpec spec = extern_call_spec(*first.extern_node, first.extern_inputs, outputs, buffers);
  if (spec.takes_scratch) {
    BufferRef scratch_buffer;  // null when the call needs no bytes (k = 0, a 0 x 0 matrix)
    if (spec.scratch_bytes > 0) {
      scratch_buffer = make_buffer(first.name + ".scratch", DType::UInt8, spec.scratch_bytes);
      scratch.push_back({scratch_buffer, group[0]});
    }
    spec.args.push_back(scratch_buffer);
  }
  return extern_call(spec.callee, std::move(spec.args), std::move(spec.int_args));
}

}  // namespace

Expr combine_reduction(te::Reducer r, const Expr& acc, const Expr& v) {
  switch (r) {
    case te::Reducer::Sum: return acc + v;
    case te::Reducer::Prod: return acc * v;
    case te::Reducer::Min: return te::min(acc, v);
    case te::Reducer::Max: return te::max(acc, v);
    case te::Reducer::None: break;
  }
  throw Error("loop IR: reduction without a reducer");
}

std::vector<size_t> writer_stages(const te::ComputeDAG& dag) {
  std::vector<size_t> writer(dag.tensors.size());
  for (size_t i = 0; i < dag.tensors.size(); ++i) {
    writer[i] = i;
    const te::Stage& s = *dag.tensors[i]->stage;
    if (!s.is_extern()) continue;
    for (size_t j = 0; j < i; ++j) {
      const te::Stage& earlier = *dag.tensors[j]->stage;
      if (earlier.is_extern() && writer[j] == j && same_extern_node(earlier, s)) {
        writer[i] = j;
        break;
      }
    }
  }
  return writer;
}

Expr flatten_loads(const Expr& e, const std::map<const te::TensorNode*, BufferRef>& buffers) {
  if (!e) return e;
  std::vector<Expr> args;
  for (const Expr& a : e->args) args.push_back(flatten_loads(a, buffers));
  if (e->op != ExprOp::Load) return args.empty() ? e : te::with_args(*e, std::move(args));
  auto it = buffers.find(e->tensor.get());
  if (it == buffers.end()) throw Error("loop IR: no buffer for tensor '" + e->tensor->name + "'");
  return load(it->second, flat_index(args, e->tensor->shape));
}

Stmt lower_stage_default(const te::TensorRef& t, const std::map<const te::TensorNode*, BufferRef>& buffers,
                         const ScheduleParams& p) {
  const te::Stage& s = *t->stage;
  if (s.is_extern()) throw Error("stage '" + s.name + "': an extern stage has no loop nest (lower_dag calls its kernel)");
  const BufferRef& out = buffers.at(t.get());
  const size_t rank = s.axes.size();
  const int64_t total = num_elements(s.shape);
  if (total == 0) return block({});
  Expr body = flatten_loads(s.body, buffers);
  Expr out_index = flat_index(s.axes, s.shape);

  // The parallel loop: the first outer axis with more than one iteration, when the stage is big enough.
  size_t parallel_axis = rank;
  if (total >= p.min_parallel_elements)
    for (size_t k = 0; k + 1 < rank; ++k)
      if (s.shape[k] > 1) {
        parallel_axis = k;
        break;
      }
  const bool vectorize = rank >= 1 && s.shape[rank - 1] >= 4 && lanes_for(s.dtype, p) > 1;
  auto outer_nest = [&](Stmt inner) {
    for (size_t k = rank - 1; k-- > 0;)
      inner = for_loop(s.axes[k], s.shape[k], k == parallel_axis ? ForKind::Parallel : ForKind::Serial, inner);
    return inner;
  };
  const ForKind inner_kind = vectorize ? ForKind::Vectorized : ForKind::Serial;

  if (s.reducer == te::Reducer::None) {
    Stmt st = store(out, out_index, body);
    if (rank == 0) return st;
    return outer_nest(for_loop(s.axes[rank - 1], s.shape[rank - 1], inner_kind, st));
  }

  Expr init = flatten_loads(s.init, buffers);
  auto reduction_loops = [&](Stmt inner) {
    for (size_t k = s.reduce_axes.size(); k-- > 0;)
      inner = for_loop(s.reduce_axes[k].var, s.reduce_axes[k].extent, ForKind::Serial, inner);
    return inner;
  };
  // Register tiling (matmul, conv): a T x J tile of the two innermost spatial axes accumulates in
  // registers (J a multiple of the vector width), so each reduction step loads a row of the right-hand
  // operand once for T rows. Rows and columns past the last whole tile use the untiled scheme below.
  const int lanes = lanes_for(s.dtype, p);
  if (rank >= 2 && lanes > 1 && s.dtype != DType::Bool && s.shape[rank - 1] >= lanes) {
    const int64_t e1 = s.shape[rank - 1], e2 = s.shape[rank - 2];
    const int64_t J = e1 >= 2 * lanes ? 2 * lanes : lanes;
    const int64_t T = std::min<int64_t>(4, e2);
    const int64_t m1 = e1 / J, m2 = e2 / T;
    const Expr& iv = s.axes[rank - 2];
    const Expr& jv = s.axes[rank - 1];
    // The stage's statements with the two inner axes replaced by `i` and `j`.
    auto at = [&](const Expr& i, const Expr& j) {
      std::map<const te::ExprNode*, Expr> m{{iv.get(), i}, {jv.get(), j}};
      struct {
        Expr body, init, out_index;
      } r{te::substitute(body, m), te::substitute(init, m), te::substitute(out_index, m)};
      return r;
    };
    // Untiled: rows i = i0 + ii (ii < rows, the loop variable `ii` given), columns j = j0 + jj, jj < cols.
    auto untiled = [&](const Expr& i, int64_t j0, int64_t cols) -> Stmt {
      Expr jj = te::var(jv->name + ".r");
      auto e = at(i, jj + j0);
      if (cols > 4096) {
        BufferRef acc = make_buffer(s.name + ".acc", s.dtype, 1, true);
        Expr a = load(acc, te::int_imm(0));
        return for_loop(jj, cols, ForKind::Serial,
                        allocate(acc, block({store(acc, te::int_imm(0), e.init),
                                             reduction_loops(store(acc, te::int_imm(0), combine_reduction(s.reducer, a, e.body))),
                                             store(out, e.out_index, a)})));
      }
      BufferRef acc = make_buffer(s.name + ".acc", s.dtype, cols, true);
      Expr a = load(acc, jj);
      auto along = [&](Stmt st) { return for_loop(jj, cols, ForKind::Vectorized, std::move(st)); };
      return allocate(acc, block({along(store(acc, jj, e.init)),
                                  reduction_loops(along(store(acc, jj, combine_reduction(s.reducer, a, e.body)))),
                                  along(store(out, e.out_index, a))}));
    };
    Expr io = te::var(iv->name + ".o"), ii = te::var(iv->name + ".i");
    Expr jo = te::var(jv->name + ".o"), ji = te::var(jv->name + ".i");
    auto e = at(io * T + ii, jo * J + ji);
    BufferRef acc = make_buffer(s.name + ".tile", s.dtype, T * J, true);
    Expr slot = ii * J + ji;
    Expr a = load(acc, slot);
    auto over_tile = [&](Stmt st) {
      return for_loop(ii, T, ForKind::Unrolled, for_loop(ji, J, ForKind::Vectorized, std::move(st)));
    };
    Stmt tile = for_loop(jo, m1, ForKind::Serial,
                         allocate(acc, block({over_tile(store(acc, slot, e.init)),
                                              reduction_loops(over_tile(store(acc, slot, combine_reduction(s.reducer, a, e.body)))),
                                              over_tile(store(out, e.out_index, a))})));
    std::vector<Stmt> row_block{tile};
    if (e1 % J != 0) {  // the last columns of the tile's rows
      Expr ir = te::var(iv->name + ".t");
      row_block.push_back(for_loop(ir, T, ForKind::Serial, untiled(io * T + ir, m1 * J, e1 % J)));
    }
    std::vector<Stmt> parts{for_loop(io, m2, parallel_axis == rank - 2 ? ForKind::Parallel : ForKind::Serial,
                                     block(std::move(row_block)))};
    if (e2 % T != 0) {  // the last rows, all columns
      Expr ir = te::var(iv->name + ".r");
      parts.push_back(for_loop(ir, e2 % T, ForKind::Serial, untiled(ir + m2 * T, 0, e1)));
    }
    Stmt st = block(std::move(parts));
    for (size_t k = rank - 2; k-- > 0;)
      st = for_loop(s.axes[k], s.shape[k], k == parallel_axis ? ForKind::Parallel : ForKind::Serial, st);
    return st;
  }
  // Accumulators for every element of the innermost spatial axis, so the reduction steps are vector
  // operations along it; a very long axis falls back to one scalar accumulator.
  const int64_t inner_extent = rank == 0 ? 1 : s.shape[rank - 1];
  if (rank == 0 || inner_extent > 4096) {
    BufferRef acc = make_buffer(s.name + ".acc", s.dtype, 1, true);
    Expr a = load(acc, te::int_imm(0));
    Stmt st = allocate(acc, block({store(acc, te::int_imm(0), init),
                                    reduction_loops(store(acc, te::int_imm(0), combine_reduction(s.reducer, a, body))),
                                    store(out, out_index, a)}));
    if (rank == 0) return st;
    return outer_nest(for_loop(s.axes[rank - 1], s.shape[rank - 1], ForKind::Serial, st));
  }
  const Expr& inner = s.axes[rank - 1];
  BufferRef acc = make_buffer(s.name + ".acc", s.dtype, inner_extent, true);
  Expr a = load(acc, inner);
  auto along_inner = [&](Stmt st) { return for_loop(inner, inner_extent, inner_kind, std::move(st)); };
  Stmt st = allocate(acc, block({along_inner(store(acc, inner, init)),
                                  reduction_loops(along_inner(store(acc, inner, combine_reduction(s.reducer, a, body)))),
                                  along_inner(store(out, out_index, a))}));
  return outer_nest(st);
}

Stmt lower_extern_stage(const te::ComputeDAG& dag, size_t stage, const std::vector<size_t>& writer,
                        const std::map<const te::TensorNode*, BufferRef>& buffers, std::vector<ScratchBuffer>& scratch) {
  if (!dag.tensors.at(stage)->stage->is_extern())
    throw Error("stage '" + dag.tensors[stage]->name + "': not an extern stage (it has a loop nest)");
  if (writer.at(stage) != stage) return nullptr;  // the call at an earlier stage of the same node writes it
  std::vector<size_t> group;
  for (size_t j = stage; j < dag.tensors.size(); ++j)
    if (writer[j] == stage) group.push_back(j);
  return lower_extern_group(dag, group, buffers, scratch);
}

std::vector<Stmt> lower_stages_default(const te::ComputeDAG& dag, const std::map<const te::TensorNode*, BufferRef>& buffers,
                                       const ScheduleParams& p, std::vector<ScratchBuffer>& scratch) {
  const std::vector<size_t> writer = writer_stages(dag);
  std::vector<Stmt> stages;
  for (size_t i = 0; i < dag.tensors.size(); ++i) {
    const te::TensorRef& t = dag.tensors[i];
    if (!t->stage->is_extern()) {
      stages.push_back(lower_stage_default(t, buffers, p));
      continue;
    }
    if (Stmt call = lower_extern_stage(dag, i, writer, buffers, scratch)) stages.push_back(std::move(call));
  }
  return stages;
}

LoweredFunc lower_dag(const te::ComputeDAG& dag, const std::string& name, const ScheduleParams& p) {
  LoweredFunc f;
  f.name = name;
  std::map<const te::TensorNode*, BufferRef> buffers;
  for (const te::TensorRef& t : dag.placeholders) {
    BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
    buffers[t.get()] = b;
    f.params.push_back(b);
  }
  for (const te::TensorRef& t : dag.tensors) {
    BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
    buffers[t.get()] = b;
    f.params.push_back(b);
  }
  f.body = block(lower_stages_default(dag, buffers, p, f.scratch));
  for (const ScratchBuffer& sb : f.scratch) f.params.push_back(sb.buffer);
  return f;
}

}  // namespace kiln::lower
