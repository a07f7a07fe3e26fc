#include "scheduler/te/op_lowering.h"

#include "scheduler/te/narrow_codes.h"

#include <algorithm>

namespace kiln::te {

const TensorRef& LowerContext::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  return inputs_[i];
}

const Tensor& LowerContext::require_constant(size_t i, const char* what) const {
  const Tensor* t = constant(i);
  if (!t) fail(std::string("input ") + std::to_string(i) + " ('" + what + "') must be known at compile time");
  return *t;
}

DType LowerContext::out_dtype(size_t i) const { return code_dtype(out_dtypes_.at(i)); }

void LowerContext::set_output(size_t i, TensorRef t) {
  if (!has_output(i)) return;
  if (t->dtype != out_dtype(i) || t->shape != out_shapes_.at(i))
    fail("lowering produced " + dtype_name(t->dtype) + " " + shape_str(t->shape) + " for output " + std::to_string(i) +
         ", shape inference says " + dtype_name(out_dtype(i)) + " " + shape_str(out_shapes_.at(i)));
  outputs_.at(i) = std::move(t);
}

std::string LowerContext::name(const std::string& suffix) const {
  return suffix.empty() ? node_.name : node_.name + "." + suffix;
}

void LoweringRegistry::add(OpLowering l) {
  if (l.domain == "ai.onnx") l.domain.clear();
  if (find(l.domain, l.op_type)) throw std::logic_error("lowering registered twice: " + l.op_type);
  defs_.push_back(std::make_unique<OpLowering>(std::move(l)));
}

const OpLowering* LoweringRegistry::find(const std::string& domain, const std::string& op_type) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  for (const auto& l : defs_)
    if (l->op_type == op_type && l->domain == d) return l.get();
  return nullptr;
}

std::vector<const OpLowering*> LoweringRegistry::all() const {
  std::vector<const OpLowering*> out;
  for (const auto& l : defs_) out.push_back(l.get());
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->op_type < b->op_type; });
  return out;
}

namespace {
const LoweringRegistry& registry() {
  static const LoweringRegistry r = [] {
    LoweringRegistry reg;
    register_elementwise_lowerings(reg);
    register_shape_lowerings(reg);
    register_reduction_lowerings(reg);
    register_nn_lowerings(reg);
    register_linalg_lowerings(reg);
    register_misc_lowerings(reg);
    return reg;
  }();
  return r;
}
}  // namespace

const OpLowering* find_lowering(const std::string& domain, const std::string& op_type) {
  return registry().find(domain, op_type);
}
std::vector<const OpLowering*> all_lowerings() { return registry().all(); }

}  // namespace kiln::te
