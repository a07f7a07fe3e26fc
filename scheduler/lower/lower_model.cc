#include "scheduler/lower/lower_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "frontend/ir/error.h"

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

  BufferRef add(const std::string& name, DType dtype, const Shape& shape, ModelParam param) {
    BufferRef b = make_buffer(name, dtype, num_elements(shape));
    param.bytes = byte_size(dtype, shape);
    add(b, std::move(param));
    return b;
  }
  void add(const BufferRef& b, ModelParam param) {
    p_.func.params.push_back(b);
    p_.params.push_back(std::move(param));
  }

 private:
  ModelProgram& p_;
};

ModelParam param_of(ModelParam::Kind kind, int io_index = -1) {
  ModelParam p;
  p.kind = kind;
  p.io_index = io_index;
  return p;
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

}  // namespace

Stmt lower_subgraph_default(const LoweredSubgraph& sg, int /*subgraph_id*/,
                            const std::map<const te::TensorNode*, BufferRef>& buffers,
                            std::vector<BufferRef>& temporaries, const ScheduleParams& params) {
  std::map<const te::TensorNode*, BufferRef> all = buffers;
  for (const te::TensorRef& t : sg.dag.tensors) {
    if (all.count(t.get())) continue;
    BufferRef b = make_buffer(t->name, t->dtype, num_elements(t->shape));
    all[t.get()] = b;
    temporaries.push_back(b);
  }
  std::vector<ScratchBuffer> scratch;
  std::vector<Stmt> stages = lower_stages_default(sg.dag, all, params, scratch);
  for (const ScratchBuffer& s : scratch) temporaries.push_back(s.buffer);
  return block(std::move(stages));
}

SubgraphScheduler default_subgraph_scheduler(const ScheduleParams& params) {
  return [params](const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, BufferRef>& buffers,
                  std::vector<BufferRef>& temporaries) {
    return lower_subgraph_default(sg, id, buffers, temporaries, params);
  };
}

ModelProgram lower_model(const Graph& g, const SubgraphDAG& sdag, const std::string& func_name,
                         const SubgraphScheduler& schedule) {
  if (!schedule) throw Error("lower_model: no subgraph scheduler");
  ModelProgram prog;
  prog.func.name = func_name;
  ParamList params(prog);
  const int num_subgraphs = static_cast<int>(sdag.subgraphs.size());

  // Every subgraph's DAG first: which inputs and weights the model reads depends on all of them.
  std::map<std::string, int> producer;  // value -> position of the subgraph that writes it
  std::vector<std::string> read_order;  // placeholders' values, in first-read order
  std::set<std::string> read;
  // Constants an op's lowering makes itself (Resize's weight tables, Compress's kept indices): no
  // graph value, so a weight of their subgraph alone.
  std::vector<te::TensorRef> lowering_constants;
  for (int k = 0; k < num_subgraphs; ++k) {
    const Subgraph& sg = sdag.subgraphs[static_cast<size_t>(k)];
    prog.subgraphs.push_back(with_distinct_output_stages(lower_subgraph(g, sg), sg));
    const LoweredSubgraph& ls = prog.subgraphs.back();
    std::set<const te::TensorNode*> placeholders;
    for (const te::TensorRef& t : ls.dag.placeholders) placeholders.insert(t.get());
    for (const auto& [name, t] : ls.inputs) {
      if (placeholders.erase(t.get()) && read.insert(name).second) read_order.push_back(name);
    }
    for (const te::TensorRef& t : ls.dag.placeholders) {
      if (!placeholders.count(t.get())) continue;
      if (!t->constant) throw Error(fmt::format("lower_model: subgraph {}: placeholder '{}' is no input of the subgraph and no constant", sg.id, t->name));
      lowering_constants.push_back(t);
    }
    for (const std::string& o : sg.outputs)
      if (!producer.emplace(o, k).second) throw Error("lower_model: value '" + o + "' is an output of two subgraphs");
  }
  // Graph outputs no subgraph writes are copied at the end, from their value's buffer.
  std::vector<std::pair<size_t, std::string>> copies;  // output index, source value
  std::set<std::string> written;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const std::string& o = g.outputs[i];
    if (producer.count(o) && written.insert(o).second) continue;
    copies.emplace_back(i, o);
    if (!producer.count(o) && read.insert(o).second) read_order.push_back(o);
  }

  // One buffer per value crossing subgraphs: inputs, weights, outputs, then values between subgraphs.
  std::map<std::string, BufferRef> value_buffer;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const std::string& name = g.inputs[i];
    if (!read.count(name) || value_buffer.count(name)) continue;
    const Value& v = g.value(name);
    value_buffer[name] = params.add(name, v.dtype, v.shape, param_of(ModelParam::Kind::Input, static_cast<int>(i)));
  }
  for (const std::string& name : read_order) {
    if (value_buffer.count(name)) continue;
    const Value& v = g.value(name);
    if (!v.constant) {
      if (producer.count(name)) continue;  // written by a subgraph: placed below
      throw Error("lower_model: value '" + name + "' is read but is no graph input, constant or subgraph output");
    }
    ModelParam p = param_of(ModelParam::Kind::Weight);
    p.weight = v.constant;
    value_buffer[name] = params.add(name, v.dtype, v.shape, std::move(p));
  }
  std::map<const te::TensorNode*, BufferRef> constant_buffer;
  for (const te::TensorRef& t : lowering_constants) {
    ModelParam p = param_of(ModelParam::Kind::Weight);
    p.weight = t->constant;
    constant_buffer[t.get()] = params.add(t->name, t->dtype, t->shape, std::move(p));
  }
  std::vector<BufferRef> output_buffers;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const std::string& name = g.outputs[i];
    const Value& v = g.value(name);
    const bool first_write = producer.count(name) && !value_buffer.count(name);
    BufferRef b = params.add(first_write ? name : fmt::format("{}.output{}", name, i), v.dtype, v.shape,
                             param_of(ModelParam::Kind::Output, static_cast<int>(i)));
    output_buffers.push_back(b);
    if (first_write) value_buffer[name] = b;
  }
  std::map<std::string, int> last_reader;
  for (int k = 0; k < num_subgraphs; ++k)
    for (const std::string& in : sdag.subgraphs[static_cast<size_t>(k)].inputs) last_reader[in] = k;
  for (int k = 0; k < num_subgraphs; ++k)
    for (const std::string& name : sdag.subgraphs[static_cast<size_t>(k)].outputs) {
      if (value_buffer.count(name)) continue;
      const Value& v = g.value(name);
      ModelParam p = param_of(ModelParam::Kind::Workspace);
      p.live_from = k;
      auto reader = last_reader.find(name);
      p.live_to = std::max(k, reader == last_reader.end() ? k : reader->second);
      value_buffer[name] = params.add(name, v.dtype, v.shape, std::move(p));
    }

  // Each subgraph's statement from the scheduler, its temporaries live in it alone.
  std::set<const Buffer*> model_buffers;
  for (const BufferRef& b : prog.func.params) model_buffers.insert(b.get());
  std::vector<Stmt> body;
  for (int k = 0; k < num_subgraphs; ++k) {
    const Subgraph& sg = sdag.subgraphs[static_cast<size_t>(k)];
    const LoweredSubgraph& ls = prog.subgraphs[static_cast<size_t>(k)];
    std::map<const te::TensorNode*, BufferRef> buffers;
    for (const te::TensorRef& t : ls.dag.placeholders) {
      auto it = constant_buffer.find(t.get());
      if (it != constant_buffer.end()) buffers[t.get()] = it->second;
    }
    for (const auto& [name, t] : ls.inputs) {
      auto it = value_buffer.find(name);
      if (it != value_buffer.end()) buffers[t.get()] = it->second;
    }
    for (size_t i = 0; i < ls.outputs.size(); ++i) buffers[ls.outputs[i].get()] = value_buffer.at(sg.outputs[i]);
    std::vector<BufferRef> temporaries;
    Stmt s = schedule(ls, sg.id, buffers, temporaries);
    if (s && s->kind == StmtKind::Block) body.insert(body.end(), s->body.begin(), s->body.end());
    else if (s) body.push_back(s);
    for (const BufferRef& t : temporaries) {
      if (!t || t->local || !model_buffers.insert(t.get()).second)
        throw Error(fmt::format("lower_model: subgraph {}: temporary '{}' is null, local or already a model buffer", sg.id,
                                t ? t->name : "?"));
      ModelParam p = param_of(ModelParam::Kind::Workspace);
      p.bytes = t->size * static_cast<int64_t>(dtype_size(t->dtype));
      p.live_from = p.live_to = k;
      params.add(t, std::move(p));
    }
  }
  for (const auto& [i, source] : copies)
    if (output_buffers[i]->size > 0) body.push_back(copy_loop(output_buffers[i], value_buffer.at(source)));
  prog.func.body = block(std::move(body));
  return prog;
}

std::string print_model_params(const ModelProgram& p) {
  std::string out;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const ModelParam& m = p.params[i];
    out += fmt::format("{} ", kind_name(m.kind));
    if (m.io_index >= 0) out += fmt::format("{} ", m.io_index);
    out += fmt::format("{}: {} bytes", p.func.params[i]->name, m.bytes);
    if (m.kind == ModelParam::Kind::Workspace) out += fmt::format(", live {}..{}", m.live_from, m.live_to);
    out += "\n";
  }
  return out;
}

}  // namespace kiln::lower
