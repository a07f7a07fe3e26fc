#include "frontend/ir/graph.h"

#include <set>

#include "frontend/ir/error.h"

namespace kiln {

std::string attr_kind_name(const AttrValue& v) {
  static const char* names[] = {"int", "float", "string", "tensor", "ints", "floats", "strings", "graph"};
  return names[v.index()];
}

std::string dims_str(const std::vector<Dim>& dims) {
  if (dims.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += 'x';
    out += dims[i].known() ? std::to_string(dims[i].value) : (dims[i].param.empty() ? "?" : dims[i].param);
  }
  return out;
}

std::string guards_str(const std::vector<Guard>& guards) {
  std::string out;
  for (const Guard& g : guards) out += (out.empty() ? "if " : " and if ") + std::string(g.when ? "" : "not ") + g.cond;
  return out;
}

bool is_control_flow(const Node& n) {
  return n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan");
}

bool is_sequence_op(const Node& n) {
  static const std::set<std::string> kOps = {
      "SequenceEmpty",     "SequenceConstruct",  "SequenceInsert",  "SequenceAt",       "SequenceErase", "SequenceLength",
      "SplitToSequence",   "ConcatFromSequence", "SequenceMap",     "Optional",         "OptionalHasElement",
      "OptionalGetElement"};
  return n.domain.empty() && kOps.count(n.op_type) != 0;
}

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Tensor: return "tensor";
    case ValueKind::Sequence: return "sequence";
    case ValueKind::Optional: return "optional";
  }
  return "?";
}

std::string composite_type_str(const CompositeType& t) {
  std::string s = "tensor(" + std::string(dtype_name(t.dtype)) + ")";
  for (auto k = t.kinds.rbegin(); k != t.kinds.rend(); ++k) s = std::string(value_kind_name(*k)) + "(" + s + ")";
  return s;
}

std::string Node::label() const { return "node '" + name + "' (" + op_type + ")"; }

namespace {
template <typename T>
const T* find_attr(const Node& n, const std::string& name, const char* want) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  if (!v)
    throw Error(n.label() + ": attribute '" + name + "' must be " + want + ", got " + attr_kind_name(it->second));
  return v;
}
}  // namespace

int64_t Node::attr_int(const std::string& name, int64_t dflt) const {
  const auto* v = find_attr<int64_t>(*this, name, "int");
  return v ? *v : dflt;
}
double Node::attr_float(const std::string& name, double dflt) const {
  const auto* v = find_attr<double>(*this, name, "float");
  return v ? *v : dflt;
}
std::string Node::attr_string(const std::string& name, const std::string& dflt) const {
  const auto* v = find_attr<std::string>(*this, name, "string");
  return v ? *v : dflt;
}
std::vector<int64_t> Node::attr_ints(const std::string& name, const std::vector<int64_t>& dflt) const {
  const auto* v = find_attr<std::vector<int64_t>>(*this, name, "ints");
  return v ? *v : dflt;
}
std::vector<double> Node::attr_floats(const std::string& name, const std::vector<double>& dflt) const {
  const auto* v = find_attr<std::vector<double>>(*this, name, "floats");
  return v ? *v : dflt;
}
std::vector<std::string> Node::attr_strings(const std::string& name) const {
  const auto* v = find_attr<std::vector<std::string>>(*this, name, "strings");
  return v ? *v : std::vector<std::string>{};
}
const Tensor* Node::attr_tensor(const std::string& name) const { return find_attr<Tensor>(*this, name, "tensor"); }

int64_t Node::required_int(const std::string& name) const {
  if (!has_attr(name)) throw Error(label() + ": missing required attribute '" + name + "'");
  return attr_int(name, 0);
}
std::vector<int64_t> Node::required_ints(const std::string& name) const {
  if (!has_attr(name)) throw Error(label() + ": missing required attribute '" + name + "'");
  return attr_ints(name);
}

std::string Graph::add_value(const std::string& base, DType dtype, Shape shape, std::shared_ptr<const Tensor> constant) {
  std::string name = base;
  for (int k = 1; has_value(name); ++k) name = base + "." + std::to_string(k);
  Value& v = values[name];
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.typed = true;
  v.constant = std::move(constant);
  return name;
}

const Tensor* Graph::constant_input(const Node& n, size_t i) const {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return nullptr;
  return value(n.inputs[i]).constant.get();
}

std::string Graph::add_constant(const std::string& base, Tensor t) {
  const DType dtype = t.dtype();
  Shape shape = t.shape();
  return add_value(base, dtype, std::move(shape), std::make_shared<const Tensor>(std::move(t)));
}

Value& Graph::value(const std::string& name) {
  auto it = values.find(name);
  if (it == values.end()) throw Error("graph '" + this->name + "': no value named '" + name + "'");
  return it->second;
}
const Value& Graph::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) throw Error("graph '" + this->name + "': no value named '" + name + "'");
  return it->second;
}

std::vector<std::string> outer_references(const Graph& sub) {
  std::set<std::string> defined(sub.inputs.begin(), sub.inputs.end()), outer;
  for (const auto& [name, v] : sub.values)
    if (v.constant) defined.insert(name);
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) outer.insert(name);
  };
  for (const Node& n : sub.nodes) {
    for (const std::string& in : n.inputs) read(in);
    for (const std::string& in : implicit_inputs(n)) read(in);
    for (const std::string& o : n.outputs)
      if (!o.empty()) defined.insert(o);
  }
  for (const std::string& o : sub.outputs) read(o);
  return {outer.begin(), outer.end()};
}

std::vector<std::string> implicit_inputs(const Node& n) {
  std::set<std::string> names;
  for (const auto& [key, value] : n.attrs)
    if (const auto* sub = std::get_if<SubgraphAttr>(&value); sub && sub->graph)
      for (const std::string& name : outer_references(*sub->graph)) names.insert(name);
  return {names.begin(), names.end()};
}

}  // namespace kiln
