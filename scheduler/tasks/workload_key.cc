#include "scheduler/tasks/workload_key.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

namespace kiln {

namespace {

using te::Expr;
using te::ExprOp;
using te::TensorNode;
using te::TensorRef;

// Positional names of the DAG's tensors: p<k> for placeholders, s<k> for stage outputs.
using NameMap = std::map<const TensorNode*, std::string>;

std::string canonical_expr(const Expr& e, const NameMap& names) {
  switch (e->op) {
    case ExprOp::IntImm: return fmt::format("{}:{}", dtype_name(e->dtype), e->int_value);
    case ExprOp::FloatImm: return fmt::format("{}:{:.17g}", dtype_name(e->dtype), e->float_value);
    case ExprOp::Var: return e->name;
    default: break;
  }
  std::string s;
  if (e->op == ExprOp::Load) {
    s = names.at(e->tensor.get()) + "[";
  } else if (e->op == ExprOp::Cast) {
    s = dtype_name(e->dtype) + "(";
  } else if (e->op == ExprOp::Reinterpret) {
    s = "bits_as_" + dtype_name(e->dtype) + "(";
  } else {
    s = std::string(te::expr_op_name(e->op)) + "(";
  }
  for (size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + canonical_expr(e->args[i], names);
  return s + (e->op == ExprOp::Load ? "]" : ")");
}

std::string attr_text(const AttrValue& v) {
  struct Printer {
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return fmt::format("{:.17g}", x); }
    std::string operator()(const std::string& x) const { return "\"" + x + "\""; }
    std::string operator()(const Tensor& t) const {
      std::string s = dtype_name(t.dtype()) + "[" + shape_str(t.shape()) + "]{";
      for (int64_t i = 0; i < t.size(); ++i)
        s += (i ? "," : "") + (t.is_float_dtype() ? fmt::format("{:.17g}", t.get_double(i)) : std::to_string(t.get_int(i)));
      return s + "}";
    }
    std::string operator()(const std::vector<int64_t>& x) const { return fmt::format("[{}]", fmt::join(x, ",")); }
    std::string operator()(const std::vector<double>& x) const { return fmt::format("[{:.17g}]", fmt::join(x, ",")); }
    std::string operator()(const std::vector<std::string>& x) const { return fmt::format("[{}]", fmt::join(x, ",")); }
    std::string operator()(const SubgraphAttr&) const { return "<graph>"; }
  };
  return std::visit(Printer{}, v);
}

std::string stage_text(const te::Stage& s, const std::string& name, const NameMap& names) {
  const std::string type = fmt::format("{} {} [{}]", s.tag, dtype_name(s.dtype), shape_str(s.shape));
  if (s.is_extern()) {
    const Node& n = *s.extern_node;
    std::string ins, attrs;
    for (const TensorRef& in : s.extern_inputs) ins += (ins.empty() ? "" : ", ") + (in ? names.at(in.get()) : "_");
    for (const auto& [key, value] : n.attrs) attrs += fmt::format(" {}={}", key, attr_text(value));
    return fmt::format("{} = extern {}{}#{} opset {} ({}){} : {}", name, n.domain.empty() ? "" : n.domain + ".",
                       n.op_type, s.extern_output, n.opset, ins, attrs, type);
  }
  std::string axes;
  for (const Expr& a : s.axes) axes += (axes.empty() ? "" : ", ") + a->name;
  std::string body = canonical_expr(s.body, names);
  if (s.reducer != te::Reducer::None) {
    std::string r;
    for (const auto& iv : s.reduce_axes) r += fmt::format("{}{}:{}", r.empty() ? "" : ", ", iv.var->name, iv.extent);
    body = fmt::format("{}({}; init {}) {}", te::reducer_name(s.reducer), r, canonical_expr(s.init, names), body);
  }
  return fmt::format("{}[{}] = {} : {}", name, axes, body, type);
}

// The canonical text of make_dag(outputs), outputs taken in the order given.
std::string text_in_output_order(const std::vector<TensorRef>& outputs) {
  te::ComputeDAG dag = te::make_dag(outputs);
  NameMap names;
  std::string out;
  for (size_t k = 0; k < dag.placeholders.size(); ++k) {
    const TensorRef& p = dag.placeholders[k];
    names[p.get()] = "p" + std::to_string(k);
    out += fmt::format("p{} = placeholder {} [{}]{}\n", k, dtype_name(p->dtype), shape_str(p->shape),
                       p->constant ? " const" : "");
  }
  for (size_t k = 0; k < dag.tensors.size(); ++k) names[dag.tensors[k].get()] = "s" + std::to_string(k);
  for (size_t k = 0; k < dag.tensors.size(); ++k)
    out += stage_text(*dag.tensors[k]->stage, "s" + std::to_string(k), names) + "\n";
  out += "outputs";
  for (const TensorRef& o : dag.outputs) out += " " + names.at(o.get());
  return out + "\n";
}

}  // namespace

std::string canonical_dag_text(const te::ComputeDAG& dag) {
  // Order the outputs by what each computes, so the graph's order of them does not matter.
  std::vector<std::pair<std::string, TensorRef>> keyed;
  for (const TensorRef& o : dag.outputs) keyed.emplace_back(text_in_output_order({o}), o);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TensorRef> ordered;
  for (const auto& [text, o] : keyed) ordered.push_back(o);
  return text_in_output_order(ordered);
}

std::string fnv1a64_hex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::string workload_key(const te::ComputeDAG& dag) { return fnv1a64_hex(canonical_dag_text(dag)); }

}  // namespace kiln
