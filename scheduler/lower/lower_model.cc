#include "scheduler/lower/lower_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/partition/step_loop_partition.h"
#include "scheduler/lower/constant_layout.h"
#include "scheduler/lower/inline_default.h"
#include "scheduler/lower/padded_planes.h"
#include "scheduler/te/narrow_codes.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

int64_t byte_size(DType t, const Shape& shape) { return num_elements(shape) * static_cast<int64_t>(dtype_size(t)); }

// `ls` with a copy stage for every output whose tensor is a placeholder (an op that passes its input
// through) or already an earlier output: each output value then has a stage of its own to write its
// buffer. Subgraphs without such outputs (nearly all) come back unchanged, so their DAG is the task's.
LoweredSubgraph with_distinct_output_stages(LoweredSubgraph ls, const Subgraph& sg) {
  std::set<const te::TensorNode*> seen;
  bool changed = false;
  for (size_t i = 0; i < ls.outputs.size(); ++i) {
    const te::TensorRef t = ls.outputs[i];
    if (t->stage && seen.insert(t.get()).second) continue;
    ls.outputs[i] = te::compute(sg.outputs[i] + ".copy", "injective", t->dtype, t->shape,
                                [t](const std::vector<te::Expr>& idx) { return te::at(t, idx); });
    seen.insert(ls.outputs[i].get());
    changed = true;
  }
  if (changed) ls.dag = te::make_dag(ls.outputs);
  return ls;
}

// dst[i] = src[i] for every element: a graph output no subgraph writes.
Stmt copy_loop(const BufferRef& dst, const BufferRef& src) {
  Expr i = te::var(dst->name + ".i");
  return for_loop(i, dst->size, dst->size >= 4 ? ForKind::Vectorized : ForKind::Serial, store(dst, i, load(src, i)));
}

// Builds the function's parameter list and the per-parameter facts side by side.
class ParamList {
 public:
  explicit ParamList(ModelProgram& p) : p_(p) {}

  // A value of a narrow type is its stored form: uint8, packed below a byte (narrow_codes.h).
  BufferRef add(const std::string& name, DType dtype, const Shape& shape, ModelParam param) {
    const te::StoredForm f = te::stored_form(dtype, shape);
    BufferRef b = make_buffer(name, f.dtype, num_elements(f.shape));
    param.bytes = byte_size(f.dtype, f.shape);
    add(b, std::move(param));
    return b;
  }
  void add(const BufferRef& b, ModelParam param) {
    p_.func.params.push_back(b);
    p_.params.push_back(std::move(param));
    added_.insert(b.get());
  }
  bool has(const Buffer* b) const { return added_.count(b) != 0; }

 private:
  ModelProgram& p_;
  std::set<const Buffer*> added_;
};

ModelParam param_of(ModelParam::Kind kind, int io_index = -1) {
  ModelParam p;
  p.kind = kind;
  p.io_index = io_index;
  return p;
}

// The global buffers (by the node their loads name) that `s` reads or writes.
void touched_buffers(const Stmt& s, std::set<const te::TensorNode*>& nodes, std::set<const te::ExprNode*>& seen) {
  if (!s) return;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->op == te::ExprOp::Load) nodes.insert(e->tensor.get());
    for (const Expr& a : e->args) walk(a);
  };
  walk(s->var);
  walk(s->index);
  walk(s->value);
  walk(s->cond);
  if (s->buffer) nodes.insert(s->buffer->node.get());
  for (const BufferRef& b : s->args)
    if (b) nodes.insert(b->node.get());
  for (const Stmt& b : s->body) touched_buffers(b, nodes, seen);
}

// Drops the weights that tuned programs read only in a rewritten layout (constant_layout.h), a weight
// of its own, and no statement of `body` reads as they are.
void drop_replaced_weights(ModelProgram& p, const std::vector<Stmt>& body) {
  std::set<const te::TensorNode*> nodes, replaced;
  std::set<const te::ExprNode*> seen;
  for (const Stmt& s : body) touched_buffers(s, nodes, seen);
  for (const BufferRef& b : p.func.params)
    if (b->relayout) replaced.insert(b->relayout->source->node.get());
  size_t kept = 0;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const te::TensorNode* node = p.func.params[i]->node.get();
    if (p.params[i].kind == ModelParam::Kind::Weight && replaced.count(node) && !nodes.count(node)) continue;
    p.params[kept] = std::move(p.params[i]);
    p.func.params[kept] = std::move(p.func.params[i]);
    ++kept;
  }
  p.params.resize(kept);
  p.func.params.resize(kept);
}

// A kiln.StepLoop's statement of the model's body: the statements of one iteration, and the buffers
// that live within one iteration (the body's values and its subgraphs' temporaries, each written
// before it is read in every iteration).
struct LoopStatement {
  size_t statement = 0;
  std::vector<Stmt> iteration;
  std::set<const Buffer*> iteration_buffers;
};

// Sets every parameter's first_step/last_step from the statements of `body` that touch it.
// `subgraph_start[k]` is the position of subgraph k's first statement. A loop's statement counts as
// one step before its iterations and one per statement of an iteration: its iteration buffers live
// from the first to the last iteration statement that touches them, so the memory plan can reuse
// their bytes within the iteration; every other buffer it touches lives through all its steps.
void set_steps(ModelProgram& p, const std::vector<Stmt>& body, const std::vector<int>& subgraph_start,
               const std::vector<LoopStatement>& loops) {
  std::map<const te::TensorNode*, size_t> param_of_node;
  for (size_t i = 0; i < p.func.params.size(); ++i) param_of_node[p.func.params[i]->node.get()] = i;
  std::map<size_t, const LoopStatement*> loop_at;
  for (const LoopStatement& l : loops) loop_at[l.statement] = &l;
  std::vector<int> base(body.size() + 1, 0);
  for (size_t s = 0; s < body.size(); ++s) {
    auto l = loop_at.find(s);
    base[s + 1] = base[s] + 1 + (l == loop_at.end() ? 0 : static_cast<int>(l->second->iteration.size()));
  }
  std::vector<int> first(p.params.size(), -1), last(p.params.size(), -1);
  auto touch = [&](const Stmt& st, int from, int to, const std::set<const Buffer*>* only, const std::set<const Buffer*>* except) {
    std::set<const te::TensorNode*> nodes;
    std::set<const te::ExprNode*> seen;
    touched_buffers(st, nodes, seen);
    for (const te::TensorNode* n : nodes) {
      auto it = param_of_node.find(n);
      if (it == param_of_node.end()) continue;  // a local buffer
      const Buffer* b = p.func.params[it->second].get();
      if ((only && !only->count(b)) || (except && except->count(b))) continue;
      if (first[it->second] < 0 || from < first[it->second]) first[it->second] = from;
      last[it->second] = std::max(last[it->second], to);
    }
  };
  p.statement_step.assign(body.size(), -1);
  for (size_t s = 0; s < body.size(); ++s) {
    auto l = loop_at.find(s);
    if (l == loop_at.end()) {
      p.statement_step[s] = base[s];
      touch(body[s], base[s], base[s], nullptr, nullptr);
      continue;
    }
    const LoopStatement& loop = *l->second;
    touch(body[s], base[s], base[s + 1] - 1, nullptr, &loop.iteration_buffers);
    for (size_t i = 0; i < loop.iteration.size(); ++i) {
      const int step = base[s] + 1 + static_cast<int>(i);
      touch(loop.iteration[i], step, step, &loop.iteration_buffers, nullptr);
    }
  }
  for (size_t i = 0; i < p.params.size(); ++i) {
    ModelParam& m = p.params[i];
    if (first[i] < 0) {
      const auto k = static_cast<size_t>(m.live_from);
      first[i] = last[i] = k < subgraph_start.size() ? base[static_cast<size_t>(subgraph_start[k])] : 0;
    }
    m.first_step = first[i];
    m.last_step = last[i];
  }
}

const char* kind_name(ModelParam::Kind k) {
  switch (k) {
    case ModelParam::Kind::Input: return "input";
    case ModelParam::Kind::Weight: return "weight";
    case ModelParam::Kind::Output: return "output";
    case ModelParam::Kind::Workspace: return "workspace";
  }
  return "?";
}

// lower_model's phases over shared state: lower every subgraph, place the model's buffers, let the
// scheduler lower each subgraph, copy the outputs no subgraph writes, then derive statement ranges.
class ModelLowering {
 public:
  ModelLowering(const Graph& g, const SubgraphDAG& sdag, const std::string& func_name)
      : g_(g), sdag_(sdag), params_(prog_) {
    prog_.func.name = func_name;
  }

  ModelProgram run(const SubgraphScheduler& schedule, const std::vector<InPlaceConcat>& in_place, std::vector<int> order) {
    lower_subgraphs();
    find_output_copies();
    place_inputs_and_weights();
    place_outputs();
    place_values_between_subgraphs();
    const std::set<int> skipped = place_concat_inputs_in_place(in_place);
    if (order.empty())
      for (size_t k = 0; k < sdag_.subgraphs.size(); ++k) order.push_back(static_cast<int>(k));
    check_order(order);
    std::vector<Stmt> body;
    std::vector<int> subgraph_start(sdag_.subgraphs.size(), 0);
    prog_.statement_subgraph.clear();
    for (const int k : order) {
      subgraph_start[static_cast<size_t>(k)] = static_cast<int>(body.size());
      if (auto loop = loop_at_.find(k); loop != loop_at_.end()) schedule_loop(loops_[loop->second], schedule, body);
      else if (!skipped.count(k)) schedule_subgraph(static_cast<size_t>(k), schedule, body);
      prog_.statement_subgraph.resize(body.size(), k);
    }
    for (const auto& [i, source] : copies_)
      if (output_buffers_[i]->size > 0) body.push_back(copy_loop(output_buffers_[i], value_buffer_.at(source)));
    prog_.statement_subgraph.resize(body.size(), -1);
    drop_replaced_weights(prog_, body);
    set_steps(prog_, body, subgraph_start, loop_statements_);
    prog_.func.body = block(std::move(body));
    return std::move(prog_);
  }

 private:
  // `order` lists every subgraph once, each after the subgraphs it reads.
  void check_order(const std::vector<int>& order) const {
    const size_t n = sdag_.subgraphs.size();
    std::vector<int> position(n, -1);
    for (size_t i = 0; i < order.size(); ++i) {
      const int k = order[i];
      if (k < 0 || static_cast<size_t>(k) >= n || position[static_cast<size_t>(k)] >= 0 || order.size() != n)
        throw InternalError("lower_model: the subgraph order is not a permutation of the subgraphs");
      position[static_cast<size_t>(k)] = static_cast<int>(i);
    }
    for (const SubgraphEdge& e : sdag_.edges)
      if (position[static_cast<size_t>(e.from)] > position[static_cast<size_t>(e.to)])
        throw InternalError("lower_model: the subgraph order puts subgraph " + std::to_string(e.to) + " before " +
                            std::to_string(e.from) + ", which it reads");
  }

  // Every subgraph's DAG first: which inputs and weights the model reads depends on all of them.
  void lower_subgraphs() {
    loops_ = partition_step_loops(g_, sdag_);
    for (size_t i = 0; i < loops_.size(); ++i) loop_at_[loops_[i].subgraph] = i;
    for (size_t k = 0; k < sdag_.subgraphs.size(); ++k) {
      const Subgraph& sg = sdag_.subgraphs[k];
      if (loop_at_.count(static_cast<int>(k))) {
        // A loop reads its inputs as a whole and writes its outputs; its body is lowered below.
        prog_.subgraphs.emplace_back();
        for (const std::string& in : sg.inputs) mark_read(in);
        for (const Guard& guard : sg.guards) mark_read(guard.cond);
        for (const std::string& o : sg.outputs) producer_.emplace(o, static_cast<int>(k));
        continue;
      }
      prog_.subgraphs.push_back(with_distinct_output_stages(lower_subgraph(g_, sg), sg));
      const LoweredSubgraph& ls = prog_.subgraphs.back();
      std::set<const te::TensorNode*> placeholders;
      for (const te::TensorRef& t : ls.dag.placeholders) placeholders.insert(t.get());
      for (const auto& [name, t] : ls.inputs) {
        if (placeholders.erase(t.get())) mark_read(name);
      }
      for (const te::TensorRef& t : ls.dag.placeholders) {
        if (!placeholders.count(t.get())) continue;
        if (!t->constant)
          throw InternalError(fmt::format("lower_model: subgraph {}: placeholder '{}' is no input of the subgraph and no constant",
                                  sg.id, t->name));
        lowering_constants_.push_back(t);
      }
      for (const Guard& guard : sg.guards) mark_read(guard.cond);
      for (const std::string& o : sg.outputs)
        if (!producer_.emplace(o, static_cast<int>(k)).second)
          throw InternalError("lower_model: value '" + o + "' is an output of two subgraphs");
    }
    // The loops' bodies, at their subgraph ids (step_loop_partition.h numbers them after the model's).
    for (const StepLoopPartition& p : loops_)
      for (const Subgraph& sg : p.body.subgraphs) {
        if (static_cast<size_t>(sg.id) != prog_.subgraphs.size())
          throw InternalError(fmt::format("lower_model: loop body subgraph {} out of order", sg.id));
        prog_.subgraphs.push_back(with_distinct_output_stages(lower_subgraph(*p.loop.body, sg), sg));
      }
  }

  void mark_read(const std::string& name) {
    if (read_.insert(name).second) read_order_.push_back(name);
  }

  // Graph outputs no subgraph writes are copied at the end, from their value's buffer.
  void find_output_copies() {
    std::set<std::string> written;
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      const std::string& o = g_.outputs[i];
      if (producer_.count(o) && written.insert(o).second) continue;
      copies_.emplace_back(i, o);
      if (!producer_.count(o)) mark_read(o);
    }
  }

  // Graph inputs in their order, then graph constants in first-read order, then the constants op
  // lowerings made; only those some statement reads.
  void place_inputs_and_weights() {
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const std::string& name = g_.inputs[i];
      if (!read_.count(name) || value_buffer_.count(name)) continue;
      const Value& v = g_.value(name);
      value_buffer_[name] = params_.add(name, v.dtype, v.shape, param_of(ModelParam::Kind::Input, static_cast<int>(i)));
    }
    for (const std::string& name : read_order_) {
      if (value_buffer_.count(name)) continue;
      const Value& v = g_.value(name);
      if (!v.constant) {
        if (producer_.count(name)) continue;  // written by a subgraph: placed with those values
        throw InternalError("lower_model: value '" + name + "' is read but is no graph input, constant or subgraph output");
      }
      ModelParam p = param_of(ModelParam::Kind::Weight);
      p.weight = v.constant;
      value_buffer_[name] = params_.add(name, v.dtype, v.shape, std::move(p));
    }
    for (const te::TensorRef& t : lowering_constants_) lowering_constant(t);
  }

  // Every graph output: the first listing of a value a subgraph computes is that value's buffer, so
  // the subgraph writes straight into the caller's memory; the others are filled by copies.
  void place_outputs() {
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      const std::string& name = g_.outputs[i];
      const Value& v = g_.value(name);
      const bool written_here = producer_.count(name) && !value_buffer_.count(name);
      BufferRef b = params_.add(written_here ? name : fmt::format("{}.output{}", name, i), v.dtype, v.shape,
                                param_of(ModelParam::Kind::Output, static_cast<int>(i)));
      output_buffers_.push_back(b);
      if (written_here) value_buffer_[name] = b;
    }
  }

  // The other subgraph outputs are workspace, live from their producer to their last reader.
  void place_values_between_subgraphs() {
    std::map<std::string, int> last_reader;
    for (size_t k = 0; k < sdag_.subgraphs.size(); ++k)
      for (const std::string& in : sdag_.subgraphs[k].inputs) last_reader[in] = static_cast<int>(k);
    for (size_t k = 0; k < sdag_.subgraphs.size(); ++k)
      for (const std::string& name : sdag_.subgraphs[k].outputs) {
        if (value_buffer_.count(name)) continue;
        const Value& v = g_.value(name);
        ModelParam p = param_of(ModelParam::Kind::Workspace);
        p.live_from = static_cast<int>(k);
        auto reader = last_reader.find(name);
        p.live_to = std::max(p.live_from, reader == last_reader.end() ? p.live_from : reader->second);
        value_buffer_[name] = params_.add(name, v.dtype, v.shape, std::move(p));
      }
  }

  // Each in-place Concat's inputs become runs of its output buffer; returns their subgraphs, which
  // then run nothing.
  std::set<int> place_concat_inputs_in_place(const std::vector<InPlaceConcat>& in_place) {
    std::map<const Buffer*, size_t> param_of;
    for (size_t i = 0; i < prog_.func.params.size(); ++i) param_of[prog_.func.params[i].get()] = i;
    auto workspace = [&](const std::string& value) -> ModelParam& {
      auto b = value_buffer_.find(value);
      auto p = b == value_buffer_.end() ? param_of.end() : param_of.find(b->second.get());
      if (p == param_of.end() || prog_.params[p->second].kind != ModelParam::Kind::Workspace)
        throw InternalError("lower_model: in-place Concat value '" + value + "' is no workspace buffer");
      return prog_.params[p->second];
    };
    std::set<int> skipped;
    for (const InPlaceConcat& c : in_place) {
      workspace(c.output);
      for (const InPlaceConcat::Slice& s : c.inputs) {
        ModelParam& p = workspace(s.value);
        if (p.within) throw InternalError("lower_model: value '" + s.value + "' is placed within two Concats");
        p.within = value_buffer_.at(c.output);
        p.offset_within = s.offset;
      }
      skipped.insert(c.subgraph);
    }
    return skipped;
  }

  // Subgraph k's statements from the scheduler (a Block spliced into `body`); its temporaries live in
  // it alone.
  void schedule_subgraph(size_t k, const SubgraphScheduler& schedule, std::vector<Stmt>& body) {
    const Subgraph& sg = sdag_.subgraphs[k];
    const LoweredSubgraph& ls = prog_.subgraphs[k];
    std::map<const te::TensorNode*, BufferRef> buffers;
    for (const te::TensorRef& t : ls.dag.placeholders) {
      auto it = constant_buffer_.find(t.get());
      if (it != constant_buffer_.end()) buffers[t.get()] = it->second;
    }
    for (const auto& [name, t] : ls.inputs) {
      auto it = value_buffer_.find(name);
      if (it != value_buffer_.end()) buffers[t.get()] = it->second;
    }
    for (size_t i = 0; i < ls.outputs.size(); ++i) buffers[ls.outputs[i].get()] = value_buffer_.at(sg.outputs[i]);
    std::vector<BufferRef> temporaries;
    // A run-time If's branch: its statements run under the guards.
    Stmt s = under_guards(sg.guards, schedule(ls, sg.id, buffers, temporaries));
    if (s && s->kind == StmtKind::Block) body.insert(body.end(), s->body.begin(), s->body.end());
    else if (s) body.push_back(s);
    add_temporaries(temporaries, static_cast<int>(k), sg.id);
  }

  // A scheduler's temporaries as model buffers, live at position `position` alone.
  void add_temporaries(const std::vector<BufferRef>& temporaries, int position, int subgraph_id) {
    for (const BufferRef& t : temporaries) {
      if (!t || t->local || params_.has(t.get()))
        throw InternalError(fmt::format("lower_model: subgraph {}: temporary '{}' is null, local or already a model buffer",
                                        subgraph_id, t ? t->name : "?"));
      ModelParam p = param_of(t->relayout ? ModelParam::Kind::Weight : ModelParam::Kind::Workspace);
      p.bytes = t->size * static_cast<int64_t>(dtype_size(t->dtype));
      p.live_from = p.live_to = position;
      if (t->relayout)
        p.weight = std::make_shared<const Tensor>(relayout_constant(weight_of(*t->relayout, subgraph_id), *t->relayout));
      params_.add(t, std::move(p));
    }
  }

  // A kiln.StepLoop (frontend/ir/step_loop.h): its carried values start as copies of its inputs in
  // their state buffers (the loop's own outputs where it has them), then `for k`: the iteration number
  // is stored, the body's subgraphs run (each scheduled as any subgraph), the next carried values are
  // copied into the state and each scan output into its slot. The body's values and temporaries
  // live within one iteration (set_steps); a carried value's next value is a buffer of its own, so
  // the body may still read the state after computing it.
  void schedule_loop(const StepLoopPartition& lp, const SubgraphScheduler& schedule, std::vector<Stmt>& out) {
    const Node& n = *lp.node;
    const Graph& b = *lp.loop.body;
    const int k = lp.subgraph;
    const auto carried = static_cast<size_t>(lp.loop.carried);
    std::map<std::string, BufferRef> buffer_of;  // body value -> buffer
    LoopStatement record;
    record.statement = out.size();
    auto temp = [&](const std::string& name, DType dtype, const Shape& shape) {
      ModelParam p = param_of(ModelParam::Kind::Workspace);
      p.live_from = p.live_to = k;
      return params_.add(n.name + "/" + name, dtype, shape, std::move(p));
    };
    auto iteration_temp = [&](const std::string& name, DType dtype, const Shape& shape) {
      BufferRef b = temp(name, dtype, shape);
      record.iteration_buffers.insert(b.get());
      return b;
    };
    auto body_value = [&](const std::string& name) -> BufferRef {
      if (auto it = buffer_of.find(name); it != buffer_of.end()) return it->second;
      const Value& v = b.value(name);
      if (!v.constant) throw InternalError("lower_model: " + n.label() + ": body value '" + name + "' has no buffer");
      ModelParam p = param_of(ModelParam::Kind::Weight);
      p.weight = v.constant;
      return buffer_of[name] = params_.add(n.name + "/" + name, v.dtype, v.shape, std::move(p));
    };
    const BufferRef iter = buffer_of[b.inputs[0]] = temp("iter", DType::Int64, {});
    std::vector<Stmt> stmts;
    for (size_t i = 0; i < carried; ++i) {
      const std::string& out_value = n.outputs[i];
      const Value& v = b.value(b.inputs[i + 1]);
      BufferRef state = !out_value.empty() && value_buffer_.count(out_value) ? value_buffer_.at(out_value) : temp(b.inputs[i + 1], v.dtype, v.shape);
      buffer_of[b.inputs[i + 1]] = state;
      if (state->size > 0) stmts.push_back(copy_loop(state, value_buffer_.at(n.inputs[i])));
    }
    for (size_t i = carried; i < n.inputs.size(); ++i) buffer_of[b.inputs[i + 1]] = value_buffer_.at(n.inputs[i]);

    const Expr step = te::var(n.name + ".k");
    std::vector<Stmt> iteration{store(iter, te::int_imm(0), step)};
    for (const Subgraph& sg : lp.body.subgraphs) {
      if (!sg.guards.empty()) throw Unsupported(g_.source + ": " + n.label() + ": an If decided at run time inside a loop's body");
      const LoweredSubgraph& ls = prog_.subgraphs[static_cast<size_t>(sg.id)];
      for (const std::string& o : sg.outputs) {
        const Value& v = b.value(o);
        buffer_of[o] = iteration_temp(o, v.dtype, v.shape);
      }
      std::map<const te::TensorNode*, BufferRef> buffers;
      for (const auto& [name, t] : ls.inputs) buffers[t.get()] = body_value(name);
      for (const te::TensorRef& t : ls.dag.placeholders)
        if (t->constant && !buffers.count(t.get())) buffers[t.get()] = lowering_constant(t);
      for (size_t i = 0; i < ls.outputs.size(); ++i) buffers[ls.outputs[i].get()] = buffer_of.at(sg.outputs[i]);
      std::vector<BufferRef> temporaries;
      if (Stmt s = schedule(ls, sg.id, buffers, temporaries)) iteration.push_back(read_iteration_from(s, iter, step));
      add_temporaries(temporaries, k, sg.id);
      for (const BufferRef& t : temporaries) record.iteration_buffers.insert(t.get());
    }
    // The next carried values: through fresh copies first when one of them is a state itself (a
    // body that passes carried values on, swapped), so no state is overwritten before it is read.
    std::vector<Stmt> carry, settle;
    for (size_t i = 0; i < carried; ++i) {
      const BufferRef state = buffer_of.at(b.inputs[i + 1]), next = body_value(b.outputs[i]);
      if (state == next || state->size == 0) continue;
      bool next_is_state = false;
      for (size_t j = 0; j < carried; ++j) next_is_state |= buffer_of.at(b.inputs[j + 1]) == next;
      if (!next_is_state) {
        carry.push_back(copy_loop(state, next));
        continue;
      }
      const BufferRef held = iteration_temp(b.outputs[i] + ".held", next->dtype, b.value(b.outputs[i]).shape);
      iteration.push_back(copy_loop(held, next));
      settle.push_back(copy_loop(state, held));
    }
    iteration.insert(iteration.end(), carry.begin(), carry.end());
    iteration.insert(iteration.end(), settle.begin(), settle.end());
    for (size_t j = 0; j + carried < b.outputs.size(); ++j) {
      const std::string& stacked = n.outputs[carried + j];
      if (stacked.empty() || !value_buffer_.count(stacked)) continue;
      const BufferRef dst = value_buffer_.at(stacked), src = body_value(b.outputs[carried + j]);
      if (src->size == 0) continue;
      const Expr slot = lp.loop.scan_reverse[j] ? te::int_imm(lp.loop.trip_count - 1) - step : step;
      const Expr e = te::var(dst->name + ".e");
      iteration.push_back(for_loop(e, src->size, src->size >= 4 ? ForKind::Vectorized : ForKind::Serial,
                                   store(dst, slot * src->size + e, load(src, e))));
    }
    record.iteration = iteration;
    Stmt each = block(std::move(iteration));
    // A loop that may stop early: an iteration runs only while its condition holds and k < M; one
    // that does not leaves every carried value as it is.
    if (lp.loop.condition) each = if_then_else(holds(buffer_of.at(b.inputs[1])), each);
    if (lp.loop.trip_limit) each = if_then_else(step < load(buffer_of.at(b.inputs[carried + 1]), te::int_imm(0)), each);
    stmts.push_back(for_loop(step, lp.loop.trip_count, ForKind::Serial, each));
    Stmt s = block(std::move(stmts));
    s = under_guards(sdag_.subgraphs[static_cast<size_t>(k)].guards, s);
    out.push_back(s);
    loop_statements_.push_back(std::move(record));
  }

  // `s` with every read of the iteration buffer `iter` replaced by the loop variable `step`: an index
  // computed from the iteration (a Gather of the step's row) is then affine in a loop variable, which
  // the code generator keeps out of the inner loops and vectorizes along, instead of a load it
  // cannot prove unchanged by the stores beside it.
  static Stmt read_iteration_from(const Stmt& s, const BufferRef& iter, const Expr& step) {
    const te::TensorNode* node = iter->node.get();
    return map_exprs(s, [&](const Expr& e) {
      return te::rewrite_loads(e, [&](const Expr& load) { return load->tensor.get() == node ? step : Expr(); });
    });
  }

  // The buffer of a constant an op's lowering made (a weight of its own).
  BufferRef lowering_constant(const te::TensorRef& t) {
    if (auto it = constant_buffer_.find(t.get()); it != constant_buffer_.end()) return it->second;
    ModelParam p = param_of(ModelParam::Kind::Weight);
    p.weight = t->constant;
    return constant_buffer_[t.get()] = params_.add(t->name, t->dtype, t->shape, std::move(p));
  }

  // Whether the bool scalar in `cond` is true.
  static Expr holds(const BufferRef& cond) {
    return te::binary(te::ExprOp::Ne, load(cond, te::int_imm(0)), te::const_of(DType::Bool, 0));
  }

  // `s` run only when the run-time If conditions `guards` hold, innermost If closest to it.
  Stmt under_guards(const std::vector<Guard>& guards, Stmt s) const {
    for (auto guard = guards.rbegin(); s && guard != guards.rend(); ++guard) {
      const Expr taken = holds(value_buffer_.at(guard->cond));
      s = if_then_else(guard->when ? taken : te::unary(te::ExprOp::Not, taken), s);
    }
    return s;
  }

  // The weight a rewritten constant is made from.
  const Tensor& weight_of(const ConstantLayout& l, int subgraph) const {
    for (size_t i = 0; i < prog_.func.params.size(); ++i)
      if (prog_.func.params[i] == l.source && prog_.params[i].kind == ModelParam::Kind::Weight && prog_.params[i].weight)
        return *prog_.params[i].weight;
    throw InternalError(fmt::format("lower_model: subgraph {}: '{}' is rewritten into another layout but is no weight", subgraph,
                                    l.source->name));
  }

  const Graph& g_;
  const SubgraphDAG& sdag_;
  ModelProgram prog_;
  ParamList params_;
  std::map<std::string, int> producer_;  // value -> position of the subgraph that writes it
  std::vector<std::string> read_order_;  // values statements read, in first-read order
  std::set<std::string> read_;
  // Constants an op's lowering makes itself (Resize's weight tables, Compress's kept indices): no
  // graph value, so a weight of their subgraph alone.
  std::vector<te::TensorRef> lowering_constants_;
  std::vector<std::pair<size_t, std::string>> copies_;  // output index, source value
  std::map<std::string, BufferRef> value_buffer_;
  std::map<const te::TensorNode*, BufferRef> constant_buffer_;
  std::vector<BufferRef> output_buffers_;
  std::vector<StepLoopPartition> loops_;
  std::vector<LoopStatement> loop_statements_;
  std::map<int, size_t> loop_at_;  // position of a loop's subgraph -> its index in loops_
};

}  // namespace

std::map<const te::TensorNode*, BufferRef> with_stage_buffers(const LoweredSubgraph& sg, const EpiloguePlan& epilogues,
                                                              const std::map<const te::TensorNode*, BufferRef>& buffers,
                                                              std::vector<BufferRef>& temporaries,
                                                              const std::set<const te::TensorNode*>& local) {
  std::map<const te::TensorNode*, BufferRef> all = buffers;
  for (const te::TensorRef& t : sg.dag.tensors) {
    if (all.count(t.get()) || epilogues.computed_inside.count(t.get()) || local.count(t.get())) continue;  // computed inside another
    BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
    all[t.get()] = b;
    temporaries.push_back(b);
  }
  return all;
}

Stmt lower_subgraph_default(const LoweredSubgraph& given, int /*subgraph_id*/,
                            const std::map<const te::TensorNode*, BufferRef>& given_buffers,
                            std::vector<BufferRef>& temporaries, const ScheduleParams& params) {
  // Element-wise chains computed inside their readers (inline_default.h); a rebuilt output keeps its
  // buffer.
  std::map<const te::TensorNode*, te::TensorRef> rebuilt;
  const LoweredSubgraph sg = inline_into_readers(given, rebuilt);
  std::map<const te::TensorNode*, BufferRef> buffers = given_buffers;
  for (const auto& [old, now] : rebuilt)
    if (auto b = given_buffers.find(old); b != given_buffers.end()) buffers[now.get()] = b->second;
  const EpiloguePlan epilogues = plan_epilogues(sg.dag);
  const PaddedPlanePlan planes = plan_padded_planes(sg.dag, params);
  const std::map<const te::TensorNode*, BufferRef> all = with_stage_buffers(sg, epilogues, buffers, temporaries, planes.planes);
  std::vector<ScratchBuffer> scratch;
  std::vector<Stmt> stages = lower_stages_default(sg.dag, epilogues, planes, all, params, scratch);
  for (const ScratchBuffer& s : scratch) temporaries.push_back(s.buffer);
  return rewrite_weight_layouts(block(std::move(stages)), sg.dag, all, temporaries);
}

SubgraphScheduler default_subgraph_scheduler(const ScheduleParams& params) {
  return [params](const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, BufferRef>& buffers,
                  std::vector<BufferRef>& temporaries) {
    return lower_subgraph_default(sg, id, buffers, temporaries, params);
  };
}

ModelProgram lower_model(const Graph& g, const SubgraphDAG& sdag, const std::string& func_name,
                         const SubgraphScheduler& schedule, const std::vector<InPlaceConcat>& in_place,
                         const std::vector<int>& order) {
  if (!schedule) throw InternalError("lower_model: no subgraph scheduler");
  return ModelLowering(g, sdag, func_name).run(schedule, in_place, order);
}

std::set<size_t> params_touched(const ModelProgram& p, size_t statement) {
  const std::vector<Stmt>& body = p.func.body->body;
  if (statement >= body.size()) throw InternalError("params_touched: no statement " + std::to_string(statement));
  std::set<const te::TensorNode*> nodes;
  std::set<const te::ExprNode*> seen;
  touched_buffers(body[statement], nodes, seen);
  std::set<size_t> out;
  for (size_t i = 0; i < p.func.params.size(); ++i)
    if (nodes.count(p.func.params[i]->node.get())) out.insert(i);
  return out;
}

std::string print_model_params(const ModelProgram& p) {
  std::string out;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const ModelParam& m = p.params[i];
    out += fmt::format("{} ", kind_name(m.kind));
    if (m.io_index >= 0) out += fmt::format("{} ", m.io_index);
    out += fmt::format("{}: {} bytes", p.func.params[i]->name, m.bytes);
    if (m.kind == ModelParam::Kind::Workspace)
      out += fmt::format(", live {}..{} (statements {}..{})", m.live_from, m.live_to, m.first_step, m.last_step);
    if (m.within) out += fmt::format(", within {} at byte {}", m.within->name, m.offset_within);
    out += "\n";
  }
  return out;
}

}  // namespace kiln::lower
