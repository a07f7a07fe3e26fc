#include "frontend/passes/node_emitter.h"

namespace kiln {

std::string NodeEmitter::op(const std::string& op, std::vector<std::string> ins, Attributes attrs, const std::string& out,
                            const std::string& domain) {
  Node n;
  n.op_type = op;
  n.domain = domain;
  n.opset = domain.empty() ? 13 : 1;
  n.inputs = std::move(ins);
  n.attrs = std::move(attrs);
  n.guards = owner_.guards;
  if (out.empty()) {
    const std::string name = fresh(op);
    n.outputs = {name};
    n.name = name;
  } else {
    n.outputs = {out};
    n.name = owner_.name + "/" + out;
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs[0];
}

std::string NodeEmitter::int64(int64_t v) { return g_.add_constant(owner_.name + "/i", Tensor::scalar_int(DType::Int64, v)); }

std::string NodeEmitter::ints(const std::vector<int64_t>& v) {
  return g_.add_constant(owner_.name + "/ints", Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v));
}

std::string NodeEmitter::fresh(const std::string& base) {
  const std::string name = g_.add_value(owner_.name + "/" + base, DType::Undefined, {});
  g_.value(name).typed = false;
  return name;
}

void NodeEmitter::add(Node n) {
  n.guards = owner_.guards;
  nodes_.push_back(std::move(n));
}

std::string append_copy(Graph& g, const std::string& from, const std::string& base) {
  const Value& v = g.value(from);
  Node copy;
  copy.op_type = "Identity";
  copy.opset = 13;
  copy.inputs = {from};
  copy.outputs = {g.add_value(base, v.dtype, v.shape, v.constant)};
  copy.name = copy.outputs[0];
  g.nodes.push_back(copy);
  return copy.outputs[0];
}

void replace_node(Graph& g, size_t index, const std::vector<Node>& nodes) {
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(index));
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(index), nodes.begin(), nodes.end());
}

}  // namespace kiln
