#include "scheduler/lower/lower_dag.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "frontend/ir/error.h"
#include "scheduler/lower/constant_layout.h"
#include "scheduler/lower/extern_calls.h"
#include "scheduler/lower/padded_planes.h"
#include "scheduler/lower/partition_loops.h"
#include "scheduler/te/analysis.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

using te::ExprOp;



int lanes_for(DType t, const ScheduleParams& p) {
  size_t bytes = std::max<size_t>(dtype_size(t), 1);
  if (t == DType::Float16 || t == DType::BFloat16) bytes = 4;  // computed in float32
  return std::max(1, static_cast<int>(p.vector_bits / 8 / bytes));
}

// Whether the load `l` reads along `axis`: one of its indices mentions it.
bool reads_along(const Expr& l, const te::ExprNode* axis) {
  for (const Expr& i : l->args)
    if (te::mentions(i, axis)) return true;
  return false;
}

// Whether a stage's work pays for a parallel loop: a dispatch and the other core's reads of what this
// one wrote cost microseconds, so a stage that takes a few microseconds alone runs serially.
// Reductions count multiply-adds (outputs x reduction extent), elementwise stages their outputs.
bool worth_parallel(const te::Stage& s, int64_t outputs, const ScheduleParams& p) {
  if (s.reduce_axes.empty()) return outputs >= p.min_parallel_elements;
  int64_t work = outputs;
  for (const te::IterVar& r : s.reduce_axes)
    if (__builtin_mul_overflow(work, std::max<int64_t>(r.extent, 1), &work)) return true;
  return work >= p.min_parallel_work;
}

// The loop the threads split among the first `count` loops of a nest (`iterations(k)` each): the
// first with 4 or more iterations, so two threads get near-equal shares, else the first with 2;
// `none` when no loop has 2.
size_t spread_axis(size_t count, const std::function<int64_t(size_t)>& iterations, size_t none) {
  for (int64_t enough : {4, 2})
    for (size_t k = 0; k < count; ++k)
      if (iterations(k) >= enough) return k;
  return none;
}

// For a stage whose innermost axes have one iteration: the last axis with more, and those after it
// bound to 0 in `unit`.
size_t last_axis_with_more(const te::Stage& s, std::map<const te::ExprNode*, Expr>& unit) {
  size_t v = s.axes.size() - 1;
  while (v > 0 && s.shape[v] == 1) unit[s.axes[v--].get()] = te::int_imm(0);
  return v;
}

// `st` inside the loops of the stage's axes before `v`, the threads splitting the first with 4 or
// more iterations (2 when none has) unless `parallel` is false.
Stmt inside_axes_before(const te::Stage& s, size_t v, bool parallel, Stmt st) {
  const size_t split = parallel ? spread_axis(v, [&](size_t k) { return s.shape[k]; }, v) : v;
  for (size_t k = v; k-- > 0;) st = for_loop(s.axes[k], s.shape[k], k == split ? ForKind::Parallel : ForKind::Serial, st);
  return st;
}

// Where the innermost reduction axes that are a window's taps begin: each reads along the stage's row
// or column axis in the same index (x[i + r]) or has one iteration, and together they have at most 25
// iterations (a 5 x 5 window), so unrolling them keeps the code small.
size_t window_taps_from(const te::Stage& s) {
  const size_t rank = s.axes.size();
  size_t from = s.reduce_axes.size();
  if (rank < 2) return from;
  int64_t taps = 1;
  while (from > 0) {
    const te::IterVar& r = s.reduce_axes[from - 1];
    bool paired = r.extent == 1;
    te::visit_loads(s.body, [&](const Expr& l) {
      for (const Expr& i : l->args)
        paired |= te::mentions(i, r.var.get()) && (te::mentions(i, s.axes[rank - 1].get()) || te::mentions(i, s.axes[rank - 2].get()));
    });
    if (!paired || taps * r.extent > 25) break;
    taps *= r.extent;
    --from;
  }
  return from;
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

namespace {

// The divisor of floordiv(x, K) or floormod(x, K) with an immediate K > 0, else 0.
int64_t immediate_divisor(const Expr& e, ExprOp op) {
  if (e->op != op || e->args[1]->op != ExprOp::IntImm || e->args[1]->int_value <= 0) return 0;
  return e->args[1]->int_value;
}

// flat * extent + idx, where flat and idx often come from unravelling one index X (a Reshape's input
// position: flat = floordiv(X, extent * C), idx = floormod(floordiv(X, C), extent)). Their sum is then
// floordiv(X, C), or X itself when C is 1, for every integer X: nested floor divisions by positive
// divisors compose, and floordiv(Y, B) * B + floormod(Y, B) = Y. Folding it leaves a Reshape's load at
// its own linear index, which vectorizes into contiguous loads instead of a gather.
Expr horner_step(const Expr& flat, int64_t extent, const Expr& idx) {
  const int64_t K = immediate_divisor(flat, ExprOp::FloorDiv);
  if (K && immediate_divisor(idx, ExprOp::FloorMod) == extent) {
    const Expr& x = flat->args[0];
    const Expr& y = idx->args[0];
    if (K == extent && te::same_expr(x, y)) return y;
    const int64_t C = immediate_divisor(y, ExprOp::FloorDiv);
    if (C && K / C == extent && K % C == 0 && te::same_expr(x, y->args[0])) return y;
  }
  return flat * extent + idx;
}

}  // namespace

Expr flat_index(const std::vector<Expr>& idx, const Shape& shape) {
  if (idx.empty()) return te::int_imm(0);
  Expr flat = idx[0];
  for (size_t k = 1; k < idx.size(); ++k) flat = horner_step(flat, shape[k], idx[k]);
  return flat;
}

std::vector<Expr> row_major_digits(const Expr& flat, const Shape& shape) {
  std::vector<Expr> out(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) {
      out[d] = te::int_imm(0);
      continue;
    }
    const Expr x = stride == 1 ? flat : te::floordiv(flat, te::int_imm(stride));
    const bool outermost = std::all_of(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(d), [](int64_t e) { return e == 1; });
    out[d] = outermost ? x : te::floormod(x, te::int_imm(shape[d]));
    stride *= shape[d];
  }
  return out;
}

std::optional<size_t> operand_block_axis(const te::Stage& s) {
  const size_t rank = s.axes.size();
  if (rank < 3) return std::nullopt;
  const te::ExprNode* row = s.axes[rank - 2].get();
  for (size_t a = rank - 2; a-- > 0;) {
    if (s.shape[a] < 2) continue;
    const te::ExprNode* axis = s.axes[a].get();
    bool along_axis = false, along_row = false, along_both = false;
    te::visit_loads(s.body, [&](const Expr& l) {
      const bool ua = reads_along(l, axis), ur = reads_along(l, row);
      along_both |= ua && ur;
      along_axis |= ua && !ur;
      along_row |= ur && !ua;
    });
    if (along_axis && along_row && !along_both) return a;
  }
  return std::nullopt;
}

EpiloguePlan plan_epilogues(const te::ComputeDAG& dag) {
  std::map<const te::TensorNode*, size_t> index;
  for (size_t i = 0; i < dag.tensors.size(); ++i) index[dag.tensors[i].get()] = i;
  // Stages that fold into their one reader (te::DagAnalysis::inlines_into_its_reader, SiLU's
  // sigmoid): a chain sees through them, so x * sigmoid(x) finishes x's reduction like a bias does.
  const te::DagAnalysis analysis(dag);
  const te::InlinedFn folded_stage = [&](const te::TensorNode* t) { return analysis.inlines_into_its_reader(t); };
  // A stage's body with the stages folded into it expanded in place; `folded` collects those.
  std::function<Expr(const te::Stage&, std::set<const te::TensorNode*>&)> expanded =
      [&](const te::Stage& c, std::set<const te::TensorNode*>& folded) {
        return te::rewrite_loads(c.body, [&](const Expr& l) -> Expr {
          if (!folded_stage(l->tensor.get())) return nullptr;
          folded.insert(l->tensor.get());
          const te::Stage& f = *l->tensor->stage;
          std::map<const te::ExprNode*, Expr> axes;
          for (size_t k = 0; k < f.axes.size(); ++k) axes[f.axes[k].get()] = l->args[k];
          return te::substitute(expanded(f, folded), axes);
        });
      };
  EpiloguePlan plan;
  // The stage that finishes `t` elementwise inside the loop nest of the reduction at `root`, with its
  // body (folded stages expanded), or none. Whatever else it reads must be stored before that nest
  // runs: a placeholder, or a stage before the root that no epilogue computes inside (a stage
  // combining two reductions waits for the later).
  struct Finisher {
    size_t stage;
    Expr body;
    std::set<const te::TensorNode*> folded;
  };
  auto finisher = [&](const te::TensorRef& t, size_t root) -> std::optional<Finisher> {
    const std::vector<te::TensorRef> r = analysis.consumers(t.get(), folded_stage);  // through folded stages
    if (r.size() != 1 || analysis.is_output(t.get())) return std::nullopt;
    const size_t c_index = index.at(r[0].get());
    const te::Stage& c = *dag.tensors[c_index]->stage;
    if (c.is_extern() || c.reducer != te::Reducer::None || c.shape != t->shape) return std::nullopt;
    if (plan.chain_members.count(dag.tensors[c_index].get())) return std::nullopt;
    Finisher f{c_index, nullptr, {}};
    f.body = expanded(c, f.folded);
    bool at_own_index = true, inputs_ready = true;
    te::visit_loads(f.body, [&](const Expr& l) {
      const te::TensorNode* in = l->tensor.get();
      if (in == t.get()) {
        for (size_t k = 0; k < l->args.size(); ++k) at_own_index &= l->args[k].get() == c.axes[k].get();
      } else if (in->stage) {
        inputs_ready &= index.at(in) < root && !plan.computed_inside.count(in);
      }
    });
    if (!at_own_index || !inputs_ready) return std::nullopt;
    return f;
  };
  for (size_t i = 0; i < dag.tensors.size(); ++i) {
    const te::TensorRef& root = dag.tensors[i];
    const te::Stage& s = *root->stage;
    if (s.is_extern() || s.reducer == te::Reducer::None) continue;
    Epilogue e;
    e.value = te::var(root->name + ".value", s.dtype);
    e.expr = e.value;
    te::TensorRef cur = root;
    for (std::optional<Finisher> next = finisher(cur, i); next; next = finisher(cur, i)) {
      const te::Stage& c = *dag.tensors[next->stage]->stage;
      std::map<const te::ExprNode*, Expr> axes;
      for (size_t k = 0; k < c.axes.size(); ++k) axes[c.axes[k].get()] = s.axes[k];
      const Expr so_far = e.expr;
      const te::TensorNode* read = cur.get();
      e.expr = te::substitute(te::rewrite_loads(next->body, [&](const Expr& l) { return l->tensor.get() == read ? so_far : nullptr; }), axes);
      plan.computed_inside.insert(cur.get());
      for (const te::TensorNode* f : next->folded) {
        plan.computed_inside.insert(f);
        plan.chain_members.insert(f);
      }
      cur = dag.tensors[next->stage];
      plan.chain_members.insert(cur.get());
    }
    if (cur == root) continue;
    e.out = cur;
    plan.by_stage.emplace(i, std::move(e));
  }
  return plan;
}

ScheduleParams schedule_params_for(int vector_bits) {
  ScheduleParams p;
  p.vector_bits = vector_bits;
  p.vector_registers = vector_bits == 256 ? 16 : 32;
  return p;
}

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

// `e` with floordiv(o * L + i, L) replaced by o and floormod(o * L + i, L) by i: what an axis split into
// o * L + i (0 <= i < L) makes of a blocked layout's channel index (channel / L, channel % L).
Expr split_divmod(const Expr& e, const Expr& o, const Expr& i, int64_t L) {
  if (!e || e->args.empty()) return e;
  std::vector<Expr> args;
  for (const Expr& a : e->args) args.push_back(split_divmod(a, o, i, L));
  if ((e->op == ExprOp::FloorDiv || e->op == ExprOp::FloorMod) && args[1]->op == ExprOp::IntImm && args[1]->int_value == L) {
    const Expr& x = args[0];
    if (x->op == ExprOp::Add && x->args[1].get() == i.get() && x->args[0]->op == ExprOp::Mul &&
        x->args[0]->args[0].get() == o.get() && x->args[0]->args[1]->op == ExprOp::IntImm && x->args[0]->args[1]->int_value == L)
      return e->op == ExprOp::FloorDiv ? o : i;
  }
  return te::with_args(*e, std::move(args));
}

// An elementwise stage whose value is a chain select(a < c1, v1, select(a < c2, v2, ... vn)) on one
// of its axes `a` (a Concat's: which input an output channel comes from) as one loop nest per range
// of a, each storing its own branch: otherwise every vector loads from every input and keeps one
// (squeezenet's channel concats took ~4x a copy). On the innermost axis (YOLOX's head concatenates
// its three scales along the flattened pixels) each range is its own vectorized loop. Null when the
// body is no such chain.
Stmt partitioned_on_select_axis(const te::Stage& s, const Expr& body, const BufferRef& out, const Expr& out_index,
                               size_t parallel_axis, ForKind inner_kind) {
  const size_t rank = s.axes.size();
  size_t axis = rank;
  std::vector<std::pair<int64_t, Expr>> pieces;  // (end of the range, its value), ranges in order
  Expr rest = body;
  int64_t begin = 0;
  while (rest->op == ExprOp::Select) {
    const Expr& cond = rest->args[0];
    if (cond->op != ExprOp::Lt || cond->args[0]->op != ExprOp::Var || cond->args[1]->op != ExprOp::IntImm) break;
    size_t k = 0;
    while (k < rank && s.axes[k].get() != cond->args[0].get()) ++k;
    const int64_t end = cond->args[1]->int_value;
    if (k >= rank || (axis != rank && k != axis) || end <= begin || end >= s.shape[k]) break;
    axis = k;
    pieces.emplace_back(end, rest->args[1]);
    rest = rest->args[2];
    begin = end;
  }
  if (pieces.empty()) return nullptr;
  pieces.emplace_back(s.shape[axis], rest);
  std::vector<Stmt> nests;
  begin = 0;
  for (const auto& [end, value] : pieces) {
    // The axis runs over [begin, end) as a loop from 0: every use of it becomes axis + begin.
    const Expr& a = s.axes[axis];
    const std::map<const te::ExprNode*, Expr> shift{{a.get(), a + begin}};
    Stmt st = for_loop(s.axes[rank - 1], axis == rank - 1 ? end - begin : s.shape[rank - 1], inner_kind,
                       store(out, te::substitute(out_index, shift), te::substitute(value, shift)));
    for (size_t k = rank - 1; k-- > 0;) {
      const ForKind kind = k == parallel_axis ? ForKind::Parallel : ForKind::Serial;
      st = for_loop(s.axes[k], k == axis ? end - begin : s.shape[k], kind, st);
    }
    nests.push_back(st);
    begin = end;
  }
  return block(std::move(nests));
}

// A stage whose innermost output axis reads its input with a large stride while another output axis
// reads it contiguously is a transpose: a layout reorder (NCHW -> NCHW16c reads one vector of 16
// channels from 16 planes; the way back reads one row from every 16th element). Vectorized along the
// innermost axis every vector is a gather. Instead it runs in L x L tiles through a local buffer: L
// contiguous vector loads along the other axis, then L contiguous vector stores along the innermost,
// their lanes picked from the tile (after LLVM's SROA, shuffles: vpermt2ps on AVX-512, with a few
// spills). Rows of the other axis past its last
// whole tile keep the plain loop. Null when the stage is not such a transpose.
Stmt transposed_tiles(const te::Stage& s, const Expr& body, const BufferRef& out, const Expr& out_index,
                      size_t parallel_axis, int64_t L) {
  const size_t rank = s.axes.size();
  if (rank < 2 || L < 2 || s.shape[rank - 1] < L) return nullptr;
  const te::ExprNode* jv = s.axes[rank - 1].get();
  if (te::linear_coeff(out_index.get(), jv) != 1) return nullptr;
  // A select (a reorder padding channels with zeros) clamps the loads under it, lane by lane: the
  // tiles would clamp every row the padding reads, the gathers only their lanes.
  std::function<bool(const Expr&)> has_select = [&](const Expr& e) {
    if (e->op == ExprOp::Select) return true;
    for (const Expr& a : e->args)
      if (has_select(a)) return true;
    return false;
  };
  if (has_select(body)) return nullptr;
  // The other axis `k`, split into ko * L + ki: some load walks its input contiguously along ki and
  // with a stride of at least L along the innermost axis.
  size_t k = rank;
  Expr ko, ki, split_body, split_index;
  for (size_t a = rank - 1; a-- > 0 && k == rank;) {
    if (s.shape[a] < L) continue;
    Expr o = te::var(s.axes[a]->name + ".o"), i = te::var(s.axes[a]->name + ".i");
    const std::map<const te::ExprNode*, Expr> split{{s.axes[a].get(), o * L + i}};
    Expr b = split_divmod(te::substitute(body, split), o, i, L);
    te::visit_loads(b, [&](const Expr& l) {
      const auto along_i = te::linear_coeff(l->args[0].get(), i.get());
      const auto along_j = te::linear_coeff(l->args[0].get(), jv);
      if (along_i && *along_i == 1 && along_j && std::abs(*along_j) >= L) k = a;
    });
    if (k == a) ko = o, ki = i, split_body = b, split_index = split_divmod(te::substitute(out_index, split), o, i, L);
  }
  if (k == rank) return nullptr;
  const Expr& kv = s.axes[k];
  Expr kr = te::var(kv->name + ".r");
  Expr jo = te::var(jv->name + ".o"), ji = te::var(jv->name + ".i");
  const int64_t whole = s.shape[k] / L, rest = s.shape[k] % L;
  auto with = [&](const Expr& e, const Expr& jx) { return te::substitute(e, {{jv, jx}}); };
  // The axes between the two, inside the tile loop of `k` (so the loop order stays the stage's).
  auto between = [&](Stmt st) {
    for (size_t a = rank - 1; a-- > k + 1;) st = for_loop(s.axes[a], s.shape[a], ForKind::Serial, st);
    return st;
  };
  BufferRef tile = make_buffer(s.name + ".tile", s.dtype, L * L, true);
  const Expr jx = jo * L + ji, slot = ji * L + ki;
  Stmt gather_in = for_loop(ji, L, ForKind::Unrolled, for_loop(ki, L, ForKind::Vectorized, store(tile, slot, with(split_body, jx))));
  Stmt scatter_out = for_loop(ki, L, ForKind::Unrolled,
                              for_loop(ji, L, ForKind::Vectorized, store(out, with(split_index, jx), load(tile, slot))));
  const int64_t columns = s.shape[rank - 1] / L, column_rest = s.shape[rank - 1] % L;
  Stmt tiles = for_loop(jo, columns, ForKind::Serial, allocate(tile, block({gather_in, scatter_out})));
  if (column_rest > 0) {  // the columns past the last whole tile, row by row (gathers)
    Expr jr = te::var(jv->name + ".r");
    const Expr jl = te::int_imm(columns * L) + jr;
    tiles = block({tiles, for_loop(ki, L, ForKind::Serial,
                                   for_loop(jr, column_rest, ForKind::Vectorized, store(out, with(split_index, jl), with(split_body, jl))))});
  }
  std::vector<Stmt> parts{for_loop(ko, whole, k == parallel_axis ? ForKind::Parallel : ForKind::Serial, between(tiles))};
  if (rest > 0) {
    const Expr kl = te::int_imm(whole * L) + kr;
    parts.push_back(for_loop(kr, rest, ForKind::Serial,
                             between(for_loop(s.axes[rank - 1], s.shape[rank - 1], ForKind::Vectorized,
                                              store(out, te::substitute(out_index, {{kv.get(), kl}}),
                                                    te::substitute(body, {{kv.get(), kl}}))))));
  }
  Stmt st = block(std::move(parts));
  for (size_t a = k; a-- > 0;) st = for_loop(s.axes[a], s.shape[a], a == parallel_axis ? ForKind::Parallel : ForKind::Serial, st);
  return st;
}

// A scalar register tile: on a core without vectors (32-bit types have one lane) an int32 reduction
// (an int8 conv's or matmul's) keeps kScalarAccumulators accumulators in general registers, up to
// kScalarTileColumns columns by kScalarTileBlocks blocks of the operand axis (output channels) when
// there is one, else by rows. Each reduction step then loads and widens an input quad once for both channels
// and a weight quad once for both columns, where one accumulator row per channel reloaded and
// re-widened every input quad per channel (DS-CNN's pointwise convs on the M4: 1.9 instructions a
// multiply-add, bench/RESULTS.md). Four accumulators leave a Thumb core's 13 general registers
// the four widened weight halves, an input's two and the pointers.
constexpr int64_t kScalarAccumulators = 4;
constexpr int64_t kScalarTileColumns = 2;
constexpr int64_t kScalarTileBlocks = 2;

// A scalar tile's operand axis: an axis outside the rows (output channels) that some loads (weights)
// read along and not along the columns, while the others (inputs) read along the columns and not
// along it. A tile's blocks of it then share each input load, and its columns each weight load.
std::optional<size_t> scalar_operand_axis(const te::Stage& s) {
  const size_t rank = s.axes.size();
  if (rank < 3) return std::nullopt;
  const te::ExprNode* column = s.axes[rank - 1].get();
  for (size_t a = rank - 2; a-- > 0;) {  // not the rows, which the tile takes apart
    if (s.shape[a] < 2) continue;
    bool along_axis = false, along_column = false, along_both = false;
    te::visit_loads(s.body, [&](const Expr& l) {
      const bool ua = reads_along(l, s.axes[a].get()), uc = reads_along(l, column);
      along_both |= ua && uc;
      along_axis |= ua && !uc;
      along_column |= uc && !ua;
    });
    if (along_axis && along_column && !along_both) return a;
  }
  return std::nullopt;
}

bool scalar_register_tile(const te::Stage& s, const ScheduleParams& p) {
  return lanes_for(s.dtype, p) == 1 && s.dtype == DType::Int32 && s.reducer == te::Reducer::Sum && !s.is_extern();
}

// A reduction whose rows are shorter than a vector (DS-CNN's 25 x 5 int8 maps in NCHW ran vectors of
// 5 lanes) but whose last two axes every access walks as one run (h * W + w: the store, and each load
// that reads along them, with h's stride W times w's) computes as one row of H * W: h is 0 and w runs
// over H * W, which reaches the same addresses, and the register tile has whole vectors. Nothing but
// such loads may read h or w (a select's bounds or a padded plane's rows keep the rows apart).
struct MergedRows {
  te::TensorRef t;
  std::map<const te::TensorNode*, BufferRef> buffers;
  std::optional<Epilogue> epilogue;
};

std::optional<MergedRows> merge_short_rows(const te::TensorRef& t, const std::map<const te::TensorNode*, BufferRef>& buffers,
                                           const ScheduleParams& p, const Epilogue* epilogue) {
  const te::Stage& s = *t->stage;
  const size_t rank = s.axes.size();
  const int lanes = lanes_for(s.dtype, p);
  // A scalar tile's rows are short when they leave a column outside the tiles.
  const bool short_rows = rank >= 3 && (scalar_register_tile(s, p) ? s.shape[rank - 1] % kScalarTileColumns != 0
                                                                   : lanes > 1 && s.shape[rank - 1] < lanes);
  if (s.reducer == te::Reducer::None || s.is_extern() || !short_rows || s.shape[rank - 2] <= 1) return std::nullopt;
  const te::ExprNode *h = s.axes[rank - 2].get(), *w = s.axes[rank - 1].get();
  const int64_t width = s.shape[rank - 1];
  bool ok = true;
  std::function<void(const Expr&)> check = [&](const Expr& e) {
    if (!e || !ok) return;
    if (e.get() == h || e.get() == w) {
      ok = false;
      return;
    }
    if (e->op == te::ExprOp::Load) {
      const Expr flat = flatten_loads(e, buffers)->args[0];
      if (!te::mentions(flat, h) && !te::mentions(flat, w)) return;
      const std::optional<int64_t> ch = te::linear_coeff(flat.get(), h), cw = te::linear_coeff(flat.get(), w);
      ok = ch && cw && *ch == width * *cw;
      return;
    }
    for (const Expr& a : e->args) check(a);
  };
  check(s.body);
  check(s.init);
  if (epilogue) check(epilogue->expr);
  if (!ok) return std::nullopt;
  const std::map<const te::ExprNode*, Expr> row0{{h, te::int_imm(0)}};
  auto stage = std::make_shared<te::Stage>(s);
  stage->shape[rank - 2] = 1;
  stage->shape[rank - 1] = s.shape[rank - 2] * width;
  stage->body = te::substitute(s.body, row0);
  if (s.init) stage->init = te::substitute(s.init, row0);
  auto node = std::make_shared<te::TensorNode>(*t);
  node->shape = stage->shape;
  node->stage = stage;
  MergedRows m{node, buffers, std::nullopt};
  if (auto b = buffers.find(t.get()); b != buffers.end()) m.buffers[node.get()] = b->second;
  if (epilogue) m.epilogue = Epilogue{epilogue->out, epilogue->value, te::substitute(epilogue->expr, row0)};
  return m;
}

Stmt lower_stage_default(const te::TensorRef& t, const std::map<const te::TensorNode*, BufferRef>& buffers,
                         const ScheduleParams& p, const Epilogue* epilogue) {
  if (std::optional<MergedRows> m = merge_short_rows(t, buffers, p, epilogue))
    return lower_stage_default(m->t, m->buffers, p, m->epilogue ? &*m->epilogue : nullptr);
  const te::Stage& s = *t->stage;
  if (s.is_extern()) throw Error("stage '" + s.name + "': an extern stage has no loop nest (lower_dag calls its kernel)");
  const BufferRef& out = buffers.at(epilogue ? epilogue->out.get() : t.get());
  // What a reduction stores for its result `v`: v, or its epilogue applied to v. `epi` is the
  // flattened epilogue with the stage's axes already replaced as at the store.
  const Expr epilogue_expr = epilogue ? flatten_loads(epilogue->expr, buffers) : nullptr;
  auto finished = [&](const Expr& epi, const Expr& v) {
    return epilogue ? te::substitute(epi, {{epilogue->value.get(), v}}) : v;
  };
  const size_t rank = s.axes.size();
  const int64_t total = num_elements(s.shape);
  if (total == 0) return block({});
  Expr body = flatten_loads(s.body, buffers);
  Expr out_index = flat_index(s.axes, s.shape);

  // The parallel loop: the first outer axis with more than one iteration, when the stage is big enough.
  size_t parallel_axis = rank;
  if (worth_parallel(s, total, p))
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

  // An elementwise stage whose innermost axes have one iteration (a blocked layout with blocks of 1,
  // which is NCHW: a 3-channel image's) vectorizes the last axis with more, and the threads split the
  // first outer one with 4 or more iterations (2 when none has).
  if (s.reducer == te::Reducer::None && rank >= 2 && s.shape[rank - 1] == 1 && lanes_for(s.dtype, p) > 1) {
    std::map<const te::ExprNode*, Expr> unit;
    const size_t v = last_axis_with_more(s, unit);
    if (s.shape[v] >= 4)
      return inside_axes_before(s, v, parallel_axis != rank,
                                for_loop(s.axes[v], s.shape[v], ForKind::Vectorized,
                                         store(out, te::substitute(out_index, unit), te::substitute(body, unit))));
  }

  if (s.reducer == te::Reducer::None && rank >= 2)
    if (Stmt st = partitioned_on_select_axis(s, body, out, out_index, parallel_axis, inner_kind)) return st;
  if (s.reducer == te::Reducer::None && vectorize)
    if (Stmt st = transposed_tiles(s, body, out, out_index, parallel_axis, lanes_for(s.dtype, p))) return st;
  if (s.reducer == te::Reducer::None) {
    Stmt st = store(out, out_index, body);
    if (rank == 0) return st;
    return outer_nest(for_loop(s.axes[rank - 1], s.shape[rank - 1], inner_kind, st));
  }

  Expr init = flatten_loads(s.init, buffers);
  // The reduction loops around `inner`, with `before_innermost` ahead of the innermost loop; those
  // from `unrolled_from` on unrolled.
  size_t unrolled_from = s.reduce_axes.size();
  auto reduction_loops = [&](Stmt inner, std::vector<Stmt> before_innermost = {}) {
    for (size_t k = s.reduce_axes.size(); k-- > 0;) {
      inner = for_loop(s.reduce_axes[k].var, s.reduce_axes[k].extent, k >= unrolled_from ? ForKind::Unrolled : ForKind::Serial, inner);
      if (k + 1 == s.reduce_axes.size() && !before_innermost.empty()) {
        before_innermost.push_back(inner);
        inner = block(std::move(before_innermost));
      }
    }
    return inner;
  };
  // Register tiling (matmul, conv): a micro-kernel of T rows of the second-innermost axis x J columns
  // of the innermost (J a multiple of the vector width) x M blocks of an outer "operand" axis (below)
  // accumulates in registers, so each reduction step loads a vector of the right-hand operand once per
  // block and broadcasts a left-hand element once per row, for M x T x J/lanes FMAs. The rows are
  // split evenly into tiles of at most the accumulator budget (3/4 of the vector registers, as ORT's
  // 6 x 4 kernel on 32 registers); columns past the last whole J use the untiled scheme below.
  const int lanes = lanes_for(s.dtype, p);
  // A core without vectors (a Cortex-M) tiles int32 reductions too (scalar_register_tile).
  const bool scalar = scalar_register_tile(s, p);
  if (rank >= 2 && (lanes > 1 || scalar) && s.dtype != DType::Bool && s.shape[rank - 1] >= lanes) {
    const int64_t e1 = s.shape[rank - 1], e2 = s.shape[rank - 2];
    bool reused_across_rows = false;
    te::visit_loads(s.body, [&](const Expr& l) {
      reused_across_rows |= reads_along(l, s.axes[rank - 1].get()) && !reads_along(l, s.axes[rank - 2].get());
    });
    // When every row reads its own vectors (a depthwise conv, a pool), a row of up to 4 vectors is one
    // tile, its tail a narrower vector: tiles of 2 vectors left a 56-wide row's last 24 columns
    // untiled, one row at a time through a chain of dependent FMAs. Such a stage's innermost reduction
    // loops that pair with the rows or columns (a window's taps) run unrolled, so the loads that rows
    // share (row i, tap k+1 is row i+1, tap k) are loaded once (bench/RESULTS.md, issue 17 step 16).
    const int64_t J = scalar ? std::min<int64_t>(e1, kScalarTileColumns)
                      : !reused_across_rows && e1 <= 4 * lanes ? e1
                      : e1 >= 2 * lanes                        ? 2 * lanes
                                                               : lanes;
    const int64_t vectors = (J + lanes - 1) / lanes;
    if (!reused_across_rows) unrolled_from = window_taps_from(s);
    const int64_t budget = p.vector_registers * 3 / 4;
    const std::optional<size_t> operand_axis = scalar ? scalar_operand_axis(s) : operand_block_axis(s);
    int64_t M = 1;
    if (operand_axis && scalar) {
      M = s.shape[*operand_axis] % kScalarTileBlocks == 0 ? kScalarTileBlocks : 1;
    } else if (operand_axis) {
      // The operand's bytes per block of its axis (a conv's weights for one output-channel block): the
      // tile re-reads M of them for every row tile, so they should stay in the L2 cache.
      int64_t slice_bytes = 0;
      te::visit_loads(s.body, [&](const Expr& l) {
        if (reads_along(l, s.axes[*operand_axis].get()))
          slice_bytes += num_elements(l->tensor->shape) * static_cast<int64_t>(dtype_size(l->tensor->dtype)) /
                         s.shape[*operand_axis];
      });
      // M must divide the blocks; 3 is there for counts that 2 does not divide: 1000 classes are 63
      // blocks (squeezenet's last conv ran 13 x 1 accumulators, a broadcast per FMA), 144 channels 9.
      auto fits = [&](int64_t m, int64_t bytes) {
        return s.shape[*operand_axis] % m == 0 && budget / (m * vectors) >= 4 && m * slice_bytes <= bytes;
      };
      for (int64_t m : {4, 3, 2})
        if (fits(m, p.l2_bytes / 2)) {
          M = m;
          break;
        }
      // One block loads a broadcast per FMA, which halves the FMA rate; two blocks whose slices fill up
      // to 3/4 of the L2 still win (ResNet-50's 7 x 7 convs, 295 KB of weights per block: 1.22x).
      if (M == 1 && fits(2, p.l2_bytes * 3 / 4)) M = 2;
    }
    // More rows pay only when some input's vector (read along the columns, not the rows) is reused
    // by every row, as a GEMM's right-hand operand is; otherwise (a depthwise conv: every row reads
    // its own vectors) four rows are enough to hide the FMA latency and spill nothing.
    const int64_t most_rows = scalar ? std::max<int64_t>(1, kScalarAccumulators / (M * J))
                                     : std::max<int64_t>(1, reused_across_rows ? budget / (M * vectors) : 4);
    const int64_t row_tiles = (e2 + most_rows - 1) / most_rows;
    const int64_t T = (e2 + row_tiles - 1) / row_tiles;
    const int64_t m1 = e1 / J, m2 = e2 / T;
    const Expr& iv = s.axes[rank - 2];
    const Expr& jv = s.axes[rank - 1];
    const te::ExprNode* av = operand_axis && M > 1 ? s.axes[*operand_axis].get() : nullptr;
    Expr ao = av ? te::var(av->name + ".o") : nullptr;
    // The stage's statements with the two inner axes replaced by `i` and `j`, and the operand axis by
    // ao * M + `a` (when blocked).
    auto at = [&](const Expr& i, const Expr& j, const Expr& a) {
      std::map<const te::ExprNode*, Expr> m{{iv.get(), i}, {jv.get(), j}};
      if (av) m[av] = ao * M + a;
      struct {
        Expr body, init, out_index, epi;
      } r{te::substitute(body, m), te::substitute(init, m), te::substitute(out_index, m),
          epilogue ? te::substitute(epilogue_expr, m) : nullptr};
      return r;
    };
    // Over the M blocks of the operand axis: `make(a)` for a = 0..M-1 as a loop of `kind`.
    auto over_blocks = [&](ForKind kind, const std::function<Stmt(const Expr&)>& make) {
      if (!av) return make(te::int_imm(0));
      Expr a = te::var(av->name + ".m");
      return for_loop(a, M, kind, make(a));
    };
    // Untiled: row i (an expression), columns j = j0 + jj, jj < cols.
    auto untiled = [&](const Expr& i, int64_t j0, int64_t cols, const Expr& a) -> Stmt {
      Expr jj = te::var(jv->name + ".r");
      auto e = at(i, jj + j0, a);
      if (cols > 4096) {
        BufferRef acc = make_buffer(s.name + ".acc", s.dtype, 1, true);
        Expr v = load(acc, te::int_imm(0));
        return for_loop(jj, cols, ForKind::Serial,
                        allocate(acc, block({store(acc, te::int_imm(0), e.init),
                                             reduction_loops(store(acc, te::int_imm(0), combine_reduction(s.reducer, v, e.body))),
                                             store(out, e.out_index, finished(e.epi, v))})));
      }
      BufferRef acc = make_buffer(s.name + ".acc", s.dtype, cols, true);
      Expr v = load(acc, jj);
      auto along = [&](Stmt st) { return for_loop(jj, cols, ForKind::Vectorized, std::move(st)); };
      return allocate(acc, block({along(store(acc, jj, e.init)),
                                  reduction_loops(along(store(acc, jj, combine_reduction(s.reducer, v, e.body)))),
                                  along(store(out, e.out_index, finished(e.epi, v)))}));
    };
    // Prefetches of the next tile's rows of the broadcast operand (a blocked conv's input: read along
    // the rows, not the columns), issued before the innermost reduction loop when that loop walks at
    // most one cache line (the input-channel block). Why: a thread that reads what the other core
    // wrote waits ~3x as long per line as for its own, and the hardware prefetcher does not follow one
    // stream per input-channel block; a tile ahead hides that latency (bench/RESULTS.md, issue 17
    // step 4). The rows past the last tile name the next row or past the buffer: a hint, never a fault.
    const te::IterVar* line_axis = s.reduce_axes.empty() ? nullptr : &s.reduce_axes.back();
    // Nor when a pixel's block is under half a line (an image's blocks of 1): the next pixels share
    // its line, so a prefetch per pixel asks for each line several times, one prefetch per
    // multiply-add of the tile (ultraface's stem conv).
    const int64_t line_bytes = line_axis ? line_axis->extent * static_cast<int64_t>(dtype_size(s.dtype)) : 0;
    if (line_bytes > 64 || line_bytes < 32) line_axis = nullptr;
    auto next_tile_prefetches = [&](const Expr& i0, int64_t rows, const Expr& jo) {
      std::vector<Stmt> out;
      if (!line_axis) return out;
      std::set<std::string> seen;
      te::visit_loads(s.body, [&](const Expr& l) {
        if (!reads_along(l, iv.get()) || reads_along(l, jv.get())) return;
        const Expr flat = flatten_loads(l, buffers)->args[0];
        for (int64_t r = 0; r < rows; ++r) {
          std::map<const te::ExprNode*, Expr> m{{iv.get(), i0 + (rows + r)}, {jv.get(), jo * J},
                                                {line_axis->var.get(), te::int_imm(0)}};
          if (av) m[av] = ao * M;
          Expr index = te::substitute(flat, m);
          if (seen.insert(l->tensor->name + "[" + te::print_expr(index) + "]").second)
            out.push_back(prefetch(buffers.at(l->tensor.get()), index));
        }
      });
      return out;
    };
    // One register tile: `rows` rows from row i0 by the J columns from jo * J.
    auto tile_at = [&](const Expr& i0, int64_t rows, const Expr& jo) -> Stmt {
      Expr ii = te::var(iv->name + ".i"), ji = te::var(jv->name + ".i");
      BufferRef acc = make_buffer(s.name + ".tile", s.dtype, M * rows * J, true);
      // One statement per accumulator: the blocks and rows unrolled, the columns a vector.
      auto over_tile = [&](const std::function<Stmt(const Expr& slot, const decltype(at(i0, i0, i0))& e)>& make) {
        return over_blocks(ForKind::Unrolled, [&](const Expr& a) {
          auto e = at(i0 + ii, jo * J + ji, a);
          return for_loop(ii, rows, ForKind::Unrolled,
                          for_loop(ji, J, scalar ? ForKind::Unrolled : ForKind::Vectorized, make((a * rows + ii) * J + ji, e)));
        });
      };
      return allocate(acc, block({over_tile([&](const Expr& slot, const auto& e) { return store(acc, slot, e.init); }),
                                  reduction_loops(over_tile([&](const Expr& slot, const auto& e) {
                                                    return store(acc, slot, combine_reduction(s.reducer, load(acc, slot), e.body));
                                                  }),
                                                  next_tile_prefetches(i0, rows, jo)),
                                  over_tile([&](const Expr& slot, const auto& e) {
                                    return store(out, e.out_index, finished(e.epi, load(acc, slot)));
                                  })}));
    };
    // The columns past the last whole J, for `rows` rows from i0 (untiled).
    auto column_rest = [&](const Expr& i0, int64_t rows) -> Stmt {
      Expr ir = te::var(iv->name + ".t");
      return over_blocks(ForKind::Serial, [&](const Expr& a) {
        return for_loop(ir, rows, ForKind::Serial, untiled(i0 + ir, m1 * J, e1 % J, a));
      });
    };
    // One tile of `rows` rows from row i0: every whole J of columns, then the columns left.
    auto tile = [&](const Expr& i0, int64_t rows) -> Stmt {
      Expr jo = te::var(jv->name + ".o");
      Stmt whole = for_loop(jo, m1, ForKind::Serial, tile_at(i0, rows, jo));
      if (e1 % J == 0) return whole;
      return block({whole, column_rest(i0, rows)});
    };
    // Which way round the two tile loops go. Rows outside (the default) keep a row tile of the
    // broadcast operand in cache while every column panel of the other operand streams past it, once
    // per row tile; columns outside keep one K x J panel of that operand (the "reused_across_rows" one:
    // a MatMul's weights) in L2 while every row tile streams past it, once per panel. Columns go
    // outside when that moves fewer bytes, and then the parallel loop splits the panels, so each thread
    // reads only its share of the weights: BERT-base's 128 x 3072 x 768 matmuls read their 9.4 MB of
    // weights 11 times with rows outside, and both threads read all of it (bench/RESULTS.md, step 7).
    int64_t row_operand_bytes = 0, column_operand_bytes = 0;
    te::visit_loads(s.body, [&](const Expr& l) {
      const bool along_rows = reads_along(l, iv.get()), along_columns = reads_along(l, jv.get());
      const int64_t bytes = num_elements(l->tensor->shape) * static_cast<int64_t>(dtype_size(l->tensor->dtype));
      if (along_rows && !along_columns) row_operand_bytes += bytes;
      if (along_columns && !along_rows) column_operand_bytes += bytes;
    });
    const bool columns_outside = !av && m1 >= 4 && m2 >= 2 &&
                                 row_operand_bytes * m1 + column_operand_bytes < column_operand_bytes * m2 + row_operand_bytes;
    // A stage worth a parallel loop whose only axis with more than one iteration is the columns (a
    // matrix-vector product: a classifier's 1 x 1000) splits its column panels between the threads;
    // otherwise it would run on one core, reading all of the weights alone.
    // (No parallel axis although the work is worth one means every axis but the columns has one
    // iteration.)
    const bool split_columns = !av && parallel_axis == rank && m1 >= 2 && worth_parallel(s, total, p);
    // The parallel loop, as above but over the loops the tiling leaves (the stage's outer axes, then
    // the outer tile loop, which runs `tile_loop` times): blocking the operand axis may leave it one or
    // two iterations, and then the next axis spreads better. `rank` for none.
    auto parallel_of = [&](int64_t tile_loop) -> size_t {
      if (parallel_axis == rank) return rank;
      return spread_axis(
          rank - 1, [&](size_t k) { return k == rank - 2 ? tile_loop : av && s.axes[k].get() == av ? s.shape[k] / M : s.shape[k]; },
          rank);
    };
    // `st` inside the stage's outer axes (the blocked operand axis counting its blocks).
    auto outer_loops = [&](Stmt st, size_t parallel) {
      for (size_t k = rank - 2; k-- > 0;) {
        const ForKind kind = k == parallel ? ForKind::Parallel : ForKind::Serial;
        st = av && s.axes[k].get() == av ? for_loop(ao, s.shape[k] / M, kind, st) : for_loop(s.axes[k], s.shape[k], kind, st);
      }
      return st;
    };
    if (columns_outside || split_columns) {
      const size_t parallel = split_columns ? rank - 2 : parallel_of(m1);
      Expr jo = te::var(jv->name + ".o"), io = te::var(iv->name + ".o");
      std::vector<Stmt> panel{for_loop(io, m2, ForKind::Serial, tile_at(io * T, T, jo))};
      if (e2 % T != 0) panel.push_back(tile_at(te::int_imm(m2 * T), e2 % T, jo));
      std::vector<Stmt> parts{for_loop(jo, m1, parallel == rank - 2 ? ForKind::Parallel : ForKind::Serial, block(std::move(panel)))};
      if (e1 % J != 0) parts.push_back(column_rest(te::int_imm(0), e2));
      return outer_loops(block(std::move(parts)), parallel);
    }
    const size_t parallel = parallel_of(m2);
    Expr io = te::var(iv->name + ".o");
    std::vector<Stmt> parts{for_loop(io, m2, parallel == rank - 2 ? ForKind::Parallel : ForKind::Serial, tile(io * T, T))};
    if (e2 % T != 0) parts.push_back(tile(te::int_imm(m2 * T), e2 % T));
    return outer_loops(block(std::move(parts)), parallel);
  }
  // A reduction whose innermost output axes have one iteration (a global pool in NCHW: 1 x C x 1 x 1;
  // a LayerNorm's mean: rows x 1) keeps accumulators along the last axis with more, as the
  // elementwise case above vectorizes it: each reduction step is then one vector operation over that
  // axis (strided loads), where one scalar accumulator made every step wait for the last add's
  // latency (BERT's LayerNorm means: 768 dependent adds a row). Each element still sums in the same
  // order, so the results are the same bits.
  if (rank >= 2 && s.shape[rank - 1] == 1 && lanes > 1 && s.dtype != DType::Bool) {
    std::map<const te::ExprNode*, Expr> unit;
    const size_t v = last_axis_with_more(s, unit);
    if (s.shape[v] >= 4 && s.shape[v] <= 4096) {
      const Expr& inner = s.axes[v];
      const int64_t extent = s.shape[v];
      BufferRef acc = make_buffer(s.name + ".acc", s.dtype, extent, true);
      Expr a = load(acc, inner);
      auto along = [&](Stmt st) { return for_loop(inner, extent, ForKind::Vectorized, std::move(st)); };
      const Expr epi = epilogue ? te::substitute(epilogue_expr, unit) : nullptr;
      return inside_axes_before(
          s, v, parallel_axis != rank,
          allocate(acc, block({along(store(acc, inner, te::substitute(init, unit))),
                               reduction_loops(along(store(acc, inner, combine_reduction(s.reducer, a, te::substitute(body, unit))))),
                               along(store(out, te::substitute(out_index, unit), finished(epi, a)))})));
    }
  }
  // A reduction to one element whose result does not depend on the order it combines in (a min or
  // max, an integer sum or product; DynamicQuantizeLinear's range): a vector of partial results
  // along the innermost reduction axis, combined into one at the end. One scalar accumulator made
  // every step wait for the last one's latency: a 1024 x 1024 input's min and max took 1.9 ms of
  // ONNX Runtime's dynamic quantization's 3.8 (bench/RESULTS.md). Float sums keep their order.
  const bool order_free = s.reducer == te::Reducer::Max || s.reducer == te::Reducer::Min || !is_float(s.dtype);
  if (total == 1 && lanes > 1 && order_free && s.dtype != DType::Bool && !s.reduce_axes.empty() &&
      s.reduce_axes.back().extent >= 2 * lanes) {
    std::map<const te::ExprNode*, Expr> unit;
    for (const Expr& a : s.axes) unit[a.get()] = te::int_imm(0);
    const te::IterVar& r = s.reduce_axes.back();
    const int64_t L = lanes, whole = r.extent / L;
    Expr ro = te::var(r.var->name + ".o"), lane = te::var(r.var->name + ".lane"), rt = te::var(r.var->name + ".t");
    BufferRef parts = make_buffer(s.name + ".parts", s.dtype, L, true);
    BufferRef acc = make_buffer(s.name + ".acc", s.dtype, 1, true);
    const Expr b = te::substitute(body, unit);
    const Expr part = load(parts, lane), a = load(acc, te::int_imm(0));
    Stmt steps = for_loop(ro, whole, ForKind::Serial,
                          for_loop(lane, L, ForKind::Vectorized,
                                   store(parts, lane, combine_reduction(s.reducer, part, te::substitute(b, {{r.var.get(), ro * L + lane}})))));
    if (r.extent % L != 0)  // the tail into lane 0's partial result
      steps = block({steps, for_loop(rt, r.extent % L, ForKind::Serial,
                                     store(parts, te::int_imm(0),
                                           combine_reduction(s.reducer, load(parts, te::int_imm(0)),
                                                             te::substitute(b, {{r.var.get(), rt + whole * L}}))))});
    for (size_t k = s.reduce_axes.size() - 1; k-- > 0;)
      steps = for_loop(s.reduce_axes[k].var, s.reduce_axes[k].extent, ForKind::Serial, steps);
    const Expr epi = epilogue ? te::substitute(epilogue_expr, unit) : nullptr;
    // Every lane starts from the reducer's identity and the result from the stage's own init, so
    // an init is combined once: a min or max takes its init (it may be combined again), an integer
    // sum 0, a product 1.
    const bool idempotent = s.reducer == te::Reducer::Max || s.reducer == te::Reducer::Min;
    const Expr start = te::substitute(init, unit);
    const Expr identity = idempotent ? start : te::int_imm(s.reducer == te::Reducer::Prod ? 1 : 0, s.dtype);
    return allocate(parts, allocate(acc, block({for_loop(lane, L, ForKind::Vectorized, store(parts, lane, identity)), steps,
                                                store(acc, te::int_imm(0), start),
                                                for_loop(lane, L, ForKind::Serial,
                                                         store(acc, te::int_imm(0), combine_reduction(s.reducer, a, load(parts, lane)))),
                                                store(out, te::substitute(out_index, unit), finished(epi, a))})));
  }
  // Accumulators for every element of the innermost spatial axis, so the reduction steps are vector
  // operations along it; a very long axis falls back to one scalar accumulator.
  const int64_t inner_extent = rank == 0 ? 1 : s.shape[rank - 1];
  if (rank == 0 || inner_extent > 4096) {
    BufferRef acc = make_buffer(s.name + ".acc", s.dtype, 1, true);
    Expr a = load(acc, te::int_imm(0));
    Stmt st = allocate(acc, block({store(acc, te::int_imm(0), init),
                                    reduction_loops(store(acc, te::int_imm(0), combine_reduction(s.reducer, a, body))),
                                    store(out, out_index, finished(epilogue_expr, a))}));
    if (rank == 0) return st;
    return outer_nest(for_loop(s.axes[rank - 1], s.shape[rank - 1], ForKind::Serial, st));
  }
  const Expr& inner = s.axes[rank - 1];
  BufferRef acc = make_buffer(s.name + ".acc", s.dtype, inner_extent, true);
  Expr a = load(acc, inner);
  auto along_inner = [&](Stmt st) { return for_loop(inner, inner_extent, inner_kind, std::move(st)); };
  Stmt st = allocate(acc, block({along_inner(store(acc, inner, init)),
                                  reduction_loops(along_inner(store(acc, inner, combine_reduction(s.reducer, a, body)))),
                                  along_inner(store(out, out_index, finished(epilogue_expr, a)))}));
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

std::vector<Stmt> lower_stages_default(const te::ComputeDAG& dag, const EpiloguePlan& epilogues, const PaddedPlanePlan& planes,
                                       const std::map<const te::TensorNode*, BufferRef>& buffers, const ScheduleParams& p,
                                       std::vector<ScratchBuffer>& scratch) {
  const std::vector<size_t> writer = writer_stages(dag);
  std::vector<Stmt> stages;
  for (size_t i = 0; i < dag.tensors.size(); ++i) {
    const te::TensorRef& t = dag.tensors[i];
    if (!t->stage->is_extern()) {
      auto e = epilogues.by_stage.find(i);
      const Epilogue* epilogue = e == epilogues.by_stage.end() ? nullptr : &e->second;
      if (auto plane = planes.by_reader.find(i); plane != planes.by_reader.end())
        stages.push_back(lower_with_padded_plane(dag, i, plane->second, buffers, p, epilogue));
      else if (!epilogues.chain_members.count(t.get()) && !planes.planes.count(t.get()))
        // A padded copy without a test per element (partition_loops.h); other stages' guards stay.
        stages.push_back(t->stage->tag == "pad" ? partition_guarded_loops(lower_stage_default(t, buffers, p, epilogue))
                                                : lower_stage_default(t, buffers, p, epilogue));
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
  const PaddedPlanePlan planes = plan_padded_planes(dag, p);
  for (const te::TensorRef& t : dag.tensors) {
    if (planes.planes.count(t.get())) continue;
    BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
    buffers[t.get()] = b;
    f.params.push_back(b);
  }
  f.body = block(lower_stages_default(dag, plan_epilogues(dag), planes, buffers, p, f.scratch));
  for (const ScratchBuffer& sb : f.scratch) f.params.push_back(sb.buffer);
  std::vector<BufferRef> rewritten;
  f.body = rewrite_weight_layouts(f.body, dag, buffers, rewritten);
  for (const BufferRef& b : rewritten) f.params.push_back(b);
  fill_on_first_call(f);
  return f;
}

}  // namespace kiln::lower
