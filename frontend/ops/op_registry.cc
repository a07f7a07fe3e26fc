#include "frontend/ops/op_registry.h"

#include <algorithm>
#include <memory>

namespace kiln {

const Value& InferContext::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  return graph_.value(node_.inputs[i]);
}

const Tensor* InferContext::constant(size_t i) const {
  if (!has_input(i)) return nullptr;
  return input(i).constant.get();
}

const Tensor& InferContext::require_constant(size_t i, const char* what) const {
  const Tensor* t = constant(i);
  if (!t)
    throw NotConstant(node_.label() + ": " + std::string("input ") + std::to_string(i) + " ('" + what + "', value '" +
         (has_input(i) ? node_.inputs[i] : std::string()) + "') must be computable at compile time",
                      has_input(i) ? node_.inputs[i] : std::string());
  return *t;
}

void InferContext::require_input(size_t i, const char* what) const {
  if (!has_input(i)) fail(std::string("missing required input ") + std::to_string(i) + " ('" + what + "')");
}

void InferContext::set_output(size_t i, DType dtype, Shape shape) {
  if (i >= node_.outputs.size()) return;  // the model does not use this optional output
  for (int64_t d : shape)
    if (d < 0) fail("inferred a negative extent for output " + std::to_string(i) + ": " + shape_str(shape));
  if (outs_.size() <= i) outs_.resize(i + 1);
  outs_[i] = Out{dtype, std::move(shape), true, nullptr};
}

void InferContext::set_output_constant(size_t i, Tensor value) {
  if (i >= node_.outputs.size()) return;
  if (outs_.size() <= i) outs_.resize(i + 1);
  outs_[i] = Out{value.dtype(), value.shape(), true, std::make_shared<const Tensor>(std::move(value))};
}

void InferContext::fail(const std::string& msg) const { throw Error(node_.label() + ": " + msg); }
void InferContext::unsupported(const std::string& msg) const { throw Unsupported(node_.label() + ": " + msg); }

const Tensor& EvalContext::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  return *inputs_[i];
}

void EvalContext::set_output(size_t i, Tensor t) {
  if (i >= node_.outputs.size()) return;
  if (outs_.size() <= i) outs_.resize(i + 1);
  outs_[i] = std::move(t);
}

void EvalContext::fail(const std::string& msg) const { throw Error(node_.label() + ": " + msg); }

namespace {
std::string canonical_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

const OpRegistry& registry() {
  static const OpRegistry r = [] {
    OpRegistry reg;
    register_elementwise_ops(reg);
    register_shape_ops(reg);
    register_reduction_ops(reg);
    register_nn_ops(reg);
    register_linalg_ops(reg);
    register_signal_ops(reg);
    register_misc_ops(reg);
    return reg;
  }();
  return r;
}
}  // namespace

void OpRegistry::add(OpDef def) {
  def.domain = canonical_domain(def.domain);
  if (find(def.domain, def.op_type)) throw std::logic_error("op registered twice: " + def.op_type);
  defs_.push_back(std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  std::string d = canonical_domain(domain);
  for (const auto& def : defs_)
    if (def->op_type == op_type && def->domain == d) return def.get();
  return nullptr;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& d : defs_) out.push_back(d.get());
  std::sort(out.begin(), out.end(), [](const OpDef* a, const OpDef* b) {
    return std::tie(a->domain, a->op_type) < std::tie(b->domain, b->op_type);
  });
  return out;
}

const OpDef* find_op(const std::string& domain, const std::string& op_type) {
  return registry().find(domain, op_type);
}

double node_flops(const Node& n, const Graph& g) {
  const OpDef* op = find_op(n.domain, n.op_type);
  if (!op || !op->flops) return 0;
  NodeShapes s{n, {}, {}};
  for (const auto& in : n.inputs) s.in.push_back(in.empty() ? Shape{} : g.value(in).shape);
  for (const auto& o : n.outputs) s.out.push_back(o.empty() ? Shape{} : g.value(o).shape);
  return op->flops(s);
}
std::vector<const OpDef*> all_ops() { return registry().all(); }

}  // namespace kiln
