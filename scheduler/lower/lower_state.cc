#include "scheduler/lower/lower_state.h"

#include <fmt/format.h>

#include "scheduler/lower/constant_layout.h"
#include "scheduler/lower/extern_calls.h"
#include "scheduler/lower/legalize_loops.h"
#include "scheduler/lower/partition_loops.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/state/index_interval.h"
#include "scheduler/state/infer_bound.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

using state::ComputeAtKind;
using state::IteratorAnnotation;
using state::IteratorKind;
using state::ScheduleError;
using state::Stage;
using state::StageKind;

// Where a stage's values live: a buffer, the region start it holds (null: 0) and strides per dimension.
// `whole`: the buffer holds the whole tensor, row-major (a global buffer).
struct Access {
  BufferRef buffer;
  std::vector<Expr> start;
  std::vector<int64_t> strides;
  bool whole = false;
};


Expr conjunction(const std::vector<Expr>& conds) {
  Expr c;
  for (const Expr& x : conds) c = c ? (c && x) : x;
  return c;
}

ForKind kind_of(IteratorAnnotation a) {
  switch (a) {
    case IteratorAnnotation::Parallel: return ForKind::Parallel;
    case IteratorAnnotation::Vectorize: return ForKind::Vectorized;
    case IteratorAnnotation::Unroll: return ForKind::Unrolled;
    default: return ForKind::Serial;  // GPU bindings and vthreads have no meaning on a CPU
  }
}

class StateLowering {
 public:
  StateLowering(const state::State& s, const std::map<const te::TensorNode*, BufferRef>& buffers, std::vector<BufferRef>& temps)
      : s_(s), given_(buffers), temps_(temps), inliner_(s), vars_(state::make_node_vars(s)), bounds_(state::infer_bounds(s, vars_)) {
    for (size_t i = 0; i < bounds_.stages.size(); ++i)
      for (const state::Iterator& it : bounds_.stages[i].iters) {
        const int64_t e = bounds_.stages[i].nodes[static_cast<size_t>(it.node)].extent;
        if (e > 0) every_loop_[vars_[i][static_cast<size_t>(it.node)].get()] = e;
      }
  }

  Stmt run() {
    const auto& stages = bounds_.stages;
    for (size_t i = 0; i < stages.size(); ++i) {
      const Stage& st = stages[i];
      if (st.kind == StageKind::Compute)
        for (const state::IterNode& n : st.nodes)
          if (n.extent < 0 && st.compute_at != ComputeAtKind::Inlined)
            throw ScheduleError("stage '" + st.name() + "': loop '" + n.name + "' has an unchosen split length");
      if (st.kind == StageKind::Placeholder) {
        auto it = given_.find(st.tensor.get());
        if (it == given_.end()) continue;  // a placeholder no stage reads
        access_[st.tensor.get()] = global_access(it->second, st.tensor->shape);
      } else if (st.kind == StageKind::Extern || st.compute_at == ComputeAtKind::Root) {
        access_[st.tensor.get()] = global_access(global_buffer(st), st.tensor->shape);
      } else if (st.compute_at == ComputeAtKind::Iter) {
        access_[st.tensor.get()] = local_access(st, bounds_.regions[i]);
      }
    }
    std::vector<Stmt> out;
    std::vector<size_t> extern_stages;
    for (size_t i = 0; i < stages.size(); ++i)
      if (stages[i].kind == StageKind::Extern) extern_stages.push_back(i);
    te::ComputeDAG extern_dag;
    for (size_t i : extern_stages) extern_dag.tensors.push_back(stages[i].tensor);
    const std::vector<size_t> writer = writer_stages(extern_dag);
    for (size_t i = 0; i < stages.size(); ++i) {
      const Stage& st = stages[i];
      if (st.kind == StageKind::Extern) {
        size_t k = static_cast<size_t>(std::find(extern_stages.begin(), extern_stages.end(), i) - extern_stages.begin());
        if (writer[k] == k) out.push_back(extern_call_for(extern_stages, writer, k));
        continue;
      }
      if (st.kind != StageKind::Compute || st.compute_at != ComputeAtKind::Root) continue;
      out.push_back(stage_nest(static_cast<int>(i)));
    }
    std::vector<BufferRef> rewritten;  // constants stored in the layout their readers walk
    for (const Stage& st : stages)
      if (st.kind == StageKind::Placeholder && st.layout_rewrite && given_.count(st.tensor.get()))
        rewritten.push_back(given_.at(st.tensor.get()));
    return rewrite_constant_layouts(legalize_loop_kinds(partition_guarded_loops(block(std::move(out)))), rewritten, temps_);
  }

 private:
  static Access global_access(const BufferRef& b, const Shape& shape) {
    Access a{b, std::vector<Expr>(shape.size()), std::vector<int64_t>(shape.size(), 1), true};
    for (size_t d = shape.size(); d-- > 1;) a.strides[d - 1] = a.strides[d] * shape[d];
    return a;
  }

  BufferRef global_buffer(const Stage& st) {
    auto it = given_.find(st.tensor.get());
    if (it != given_.end()) return it->second;
    BufferRef b = make_buffer(st.name(), st.tensor->dtype, num_elements(st.tensor->shape));
    temps_.push_back(b);
    return b;
  }

  Stmt extern_call_for(const std::vector<size_t>& extern_stages, const std::vector<size_t>& writer, size_t k) {
    const Stage& first = bounds_.stages[extern_stages[k]];
    std::vector<te::TensorRef> outputs(first.op->extern_node->outputs.size());
    for (size_t j = 0; j < extern_stages.size(); ++j) {
      if (writer[j] != k) continue;
      const Stage& st = bounds_.stages[extern_stages[j]];
      outputs.at(static_cast<size_t>(st.op->extern_output)) = st.tensor;
    }
    std::map<const te::TensorNode*, BufferRef> flat;
    for (const auto& [t, a] : access_) flat[t] = a.buffer;
    ExternCallSpec spec = extern_call_spec(*first.op->extern_node, first.op->extern_inputs, outputs, flat);
    if (spec.takes_scratch) {
      BufferRef scratch;
      if (spec.scratch_bytes > 0) {
        scratch = make_buffer(first.name() + ".scratch", DType::UInt8, spec.scratch_bytes);
        temps_.push_back(scratch);
      }
      spec.args.push_back(scratch);
    }
    return extern_call(spec.callee, std::move(spec.args), std::move(spec.int_args));
  }

  // Loads of stage tensors redirected to their buffers: flat index relative to the region held.
  Expr flatten(const Expr& e) {
    return te::rewrite_loads(e, [&](const Expr& l) -> Expr {
      auto it = access_.find(l->tensor.get());
      if (it == access_.end()) throw Error("loop IR: no buffer for tensor '" + l->tensor->name + "'");
      const Access& a = it->second;
      // A whole tensor's row-major index, as the default schedule's (lower_dag.h flat_index): it folds
      // a Reshape's unravelled position back into one, so the copy is contiguous, not a gather.
      if (a.whole && l->args.size() == l->tensor->shape.size()) return load(a.buffer, flat_index(l->args, l->tensor->shape));
      Expr idx;
      for (size_t d = 0; d < l->args.size(); ++d) {
        Expr x = a.start[d] ? l->args[d] - a.start[d] : l->args[d];
        if (a.strides[d] != 1) x = x * a.strides[d];
        idx = idx ? idx + x : x;
      }
      return load(a.buffer, idx ? idx : te::int_imm(0));
    });
  }

  // The statement computing stage `id` (its whole nest, with the stages attached inside it).
  Stmt stage_nest(int id) {
    const Stage& st = bounds_.stages[static_cast<size_t>(id)];
    const std::vector<Expr>& vars = vars_[static_cast<size_t>(id)];
    const std::vector<state::RootRegion>& regions = bounds_.regions[static_cast<size_t>(id)];
    const te::Stage& op = *st.op;
    if (num_elements(op.shape) == 0) return block({});
    const size_t rank = op.axes.size();
    std::vector<Expr> nv = state::node_values(st, vars);

    // Root values, and the guards that keep overshooting loops (non-divisible splits, regions that
    // leave the domain) from computing outside it.
    state::RangeMap all_ranged;
    for (const state::Iterator& it : st.iters)
      all_ranged[vars[static_cast<size_t>(it.node)].get()] = st.nodes[static_cast<size_t>(it.node)].extent;
    std::map<const te::ExprNode*, Expr> root_of;
    std::vector<Expr> spatial_guards, reduce_guards;
    for (int r = 0; r < st.num_roots; ++r) {
      const auto ru = static_cast<size_t>(r);
      const state::RootRegion& reg = regions[ru];
      Expr value = reg.start ? reg.start + nv[ru] : nv[ru];
      const bool spatial = ru < rank;
      root_of[spatial ? op.axes[ru].get() : op.reduce_axes[ru - rank].var.get()] = value;
      auto& guards = spatial ? spatial_guards : reduce_guards;
      auto iv = state::index_interval(nv[ru], all_ranged);
      if (!iv || !iv->base.empty() || iv->hi >= reg.extent) guards.push_back(nv[ru] < te::int_imm(reg.extent));
      // A region that moves with the enclosing loops may stay inside the domain all the same (tiles that
      // divide it): no guard then, as a guard in a vector loop costs masked loads and stores.
      const int64_t domain = st.root_domain[ru];
      auto range = reg.may_leave_domain ? state::index_interval(value, every_loop_) : std::nullopt;
      if (reg.may_leave_domain && !(range && range->base.empty() && range->lo >= 0 && range->hi < domain)) {
        guards.push_back(value >= te::int_imm(0));
        guards.push_back(value < te::int_imm(domain));
      }
    }

    // This stage's own buffer: global (root) or a local tile (computed at a loop).
    Access own;
    std::vector<Expr> own_index(rank);
    if (st.compute_at == ComputeAtKind::Root) {
      own = access_.at(st.tensor.get());
      for (size_t d = 0; d < rank; ++d) own_index[d] = root_of[op.axes[d].get()];
    } else {
      own = access_.at(st.tensor.get());
      for (size_t d = 0; d < rank; ++d) own_index[d] = nv[d];
    }
    Expr out_index;
    for (size_t d = 0; d < rank; ++d) {
      Expr x = own.strides[d] == 1 ? own_index[d] : own_index[d] * own.strides[d];
      out_index = out_index ? out_index + x : x;
    }
    if (!out_index) out_index = te::int_imm(0);

    Expr body = flatten(te::substitute(inliner_.expand(op.body), root_of));
    auto guarded = [&](Stmt s, bool with_reduction) {
      std::vector<Expr> g = spatial_guards;
      if (with_reduction) g.insert(g.end(), reduce_guards.begin(), reduce_guards.end());
      Expr c = conjunction(g);
      return c ? if_then_else(c, std::move(s)) : s;
    };

    // Loop kinds, with auto-unroll pragmas turning small inner loops into unrolled ones.
    const size_t n = st.iters.size();
    std::vector<ForKind> kinds(n);
    for (size_t k = 0; k < n; ++k) kinds[k] = kind_of(st.iters[k].annotation);
    for (size_t k = 0; k < n; ++k) {
      const int64_t max_step = st.iters[k].auto_unroll_max_step;
      if (max_step <= 0) continue;
      for (size_t j = k + 1; j < n; ++j) {
        int64_t product = 1;
        for (size_t q = j; q < n; ++q) product *= st.nodes[static_cast<size_t>(st.iters[q].node)].extent;
        if (product <= max_step && kinds[j] == ForKind::Serial) kinds[j] = ForKind::Unrolled;
      }
    }
    auto extent_of = [&](size_t k) { return st.nodes[static_cast<size_t>(st.iters[k].node)].extent; };
    auto var_of = [&](size_t k) { return vars[static_cast<size_t>(st.iters[k].node)]; };

    // The first loop that walks the reduction: the accumulator starts just outside it.
    size_t first_reduce = n;
    if (op.reducer != te::Reducer::None)
      for (size_t k = 0; k < n; ++k)
        if (st.nodes[static_cast<size_t>(st.iters[k].node)].kind != IteratorKind::Spatial) {
          first_reduce = k;
          break;
        }

    Stmt inner;
    if (op.reducer == te::Reducer::None) {
      inner = guarded(store(own.buffer, out_index, body), false);
    } else {
      Expr acc = load(own.buffer, out_index);
      inner = guarded(store(own.buffer, out_index, combine_reduction(op.reducer, acc, body)), true);
    }
    Stmt init;
    if (op.reducer != te::Reducer::None) {
      Expr init_value = flatten(te::substitute(inliner_.expand(op.init), root_of));
      init = guarded(store(own.buffer, out_index, init_value), false);
      for (size_t k = n; k-- > first_reduce + 1 && first_reduce < n;)
        if (st.nodes[static_cast<size_t>(st.iters[k].node)].kind == IteratorKind::Spatial)
          init = for_loop(var_of(k), extent_of(k), kinds[k], init);
    }
    if (first_reduce == n && init) inner = block({init, inner});  // a reduction over no loops
    for (size_t k = n; k-- > 0;) {
      inner = with_attached(id, st.iters[k].node, inner);
      inner = for_loop(var_of(k), extent_of(k), kinds[k], inner);
      if (k == first_reduce && init) inner = block({init, inner});
    }
    return inner;
  }

  // `rest` preceded by the nests of the stages computed at loop `node` of stage `id`, each with its
  // local buffer allocated around both.
  Stmt with_attached(int id, int node, Stmt rest) {
    std::vector<int> attached;
    for (size_t i = 0; i < bounds_.stages.size(); ++i) {
      const Stage& st = bounds_.stages[i];
      if (st.kind == StageKind::Compute && st.compute_at == ComputeAtKind::Iter && st.attach_stage == id && st.attach_node == node)
        attached.push_back(static_cast<int>(i));
    }
    if (attached.empty()) return rest;
    // Producers first: attached stages are in topological order by id. Each nest needs the buffers
    // of the earlier ones, so allocate from the outside in.
    std::vector<Stmt> nests;
    std::vector<BufferRef> locals;
    for (int a : attached) {
      nests.push_back(stage_nest(a));
      locals.push_back(access_.at(bounds_.stages[static_cast<size_t>(a)].tensor.get()).buffer);
    }
    nests.push_back(rest);
    Stmt s = block(std::move(nests));
    for (size_t k = locals.size(); k-- > 0;) s = allocate(locals[k], s);
    return s;
  }

  Access local_access(const Stage& st, const std::vector<state::RootRegion>& regions) {
    const size_t rank = st.op->axes.size();
    Access a;
    a.start.resize(rank);
    a.strides.assign(rank, 1);
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      for (const state::StorageAlign& sa : st.storage_align)
        if (static_cast<size_t>(sa.axis) == d && d + 1 < rank) {
          int64_t rem = ((stride - sa.offset) % sa.factor + sa.factor) % sa.factor;
          if (rem) stride += sa.factor - rem;
        }
      a.strides[d] = stride;
      a.start[d] = regions[d].start;
      stride *= regions[d].extent;
    }
    a.buffer = make_buffer(st.name() + ".local", st.op->dtype, std::max<int64_t>(stride, 1), true);
    return a;
  }

  const state::State& s_;
  const std::map<const te::TensorNode*, BufferRef>& given_;
  std::vector<BufferRef>& temps_;
  state::Inliner inliner_;
  std::vector<std::vector<Expr>> vars_;
  state::Bounds bounds_;
  state::RangeMap every_loop_;  // every loop variable of every stage, with its extent
  std::map<const te::TensorNode*, Access> access_;
};

}  // namespace

Stmt lower_state(const state::State& s, const std::map<const te::TensorNode*, BufferRef>& buffers,
                 std::vector<BufferRef>& temporaries) {
  return StateLowering(s, buffers, temporaries).run();
}

std::map<const te::TensorNode*, BufferRef> add_io_params(const te::ComputeDAG& dag, LoweredFunc& f) {
  std::map<const te::TensorNode*, BufferRef> buffers;
  auto add = [&](const te::TensorRef& t) {
    if (buffers.count(t.get())) return;
    BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
    buffers[t.get()] = b;
    f.params.push_back(b);
  };
  for (const te::TensorRef& t : dag.placeholders) add(t);
  for (const te::TensorRef& t : dag.outputs) add(t);
  return buffers;
}

LoweredFunc lower_state_func(const state::State& s, const std::string& name, bool fill_rewritten_constants) {
  LoweredFunc f;
  f.name = name;
  const std::map<const te::TensorNode*, BufferRef> buffers = add_io_params(s.dag(), f);
  std::vector<BufferRef> temps;
  f.body = lower_state(s, buffers, temps);
  for (const BufferRef& b : temps) f.params.push_back(b);
  if (fill_rewritten_constants) fill_on_first_call(f);
  return f;
}

}  // namespace kiln::lower
