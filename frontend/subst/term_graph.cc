#include "frontend/subst/term_graph.h"

#include "frontend/ir/error.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/reference/interpreter.h"

namespace kiln::subst {
namespace {

class TermWriter {
 public:
  TermWriter(ModelBuilder& b, const std::map<std::string, Tensor>& leaves) : b_(b), leaves_(leaves) {}

  // The value computing `t`, its nodes added once however often it is shared.
  std::string write(const TermRef& t) {
    if (auto it = written_.find(t.get()); it != written_.end()) return it->second;
    const std::string v = t->op == "leaf" ? leaf_value(*t) : node(*t);
    written_[t.get()] = v;
    return v;
  }

 private:
  std::string leaf_value(const Term& t) {
    if (!leaves_.count(t.name)) throw Error("term leaf '" + t.name + "' has no value");
    return t.name;
  }

  std::string ints(const std::vector<int64_t>& v) {
    const std::string name = "c" + std::to_string(next_++);
    b_.initializer(name, Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v));
    return name;
  }

  std::string node(const Term& t) {
    std::vector<std::string> args;
    for (const TermRef& a : t.args) args.push_back(write(a));
    const std::string out = "t" + std::to_string(next_++);
    const std::string& op = t.op;
    if (op == "ewadd" || op == "biasadd") b_.node("Add", args, {out});
    else if (op == "ewmul" || op == "smul") b_.node("Mul", args, {out});
    else if (op == "transpose") b_.node("Transpose", args, {out});
    else if (op == "matmul") b_.node("MatMul", args, {out});
    else if (op == "relu") b_.node("Relu", args, {out});
    else if (op == "concat") b_.node("Concat", args, {out}).attr("axis", t.axis);
    else if (op == "split0" || op == "split1") {
      const bool first = op == "split0";
      int64_t at = t.split_at;
      if (at < 0) {  // the extent of a leaf
        auto leaf = leaves_.find(t.split_leaf);
        if (leaf == leaves_.end()) throw Error("term split point: leaf '" + t.split_leaf + "' has no value");
        const Shape& shape = leaf->second.shape();
        const int64_t a = t.split_leaf_axis < 0 ? t.axis : t.split_leaf_axis;
        if (a >= static_cast<int64_t>(shape.size())) throw Error("term split point: leaf '" + t.split_leaf + "' has no axis " + std::to_string(a));
        at = shape[static_cast<size_t>(a)];
      }
      b_.node("Slice", {args[0], ints({first ? 0 : at}), ints({first ? at : INT64_MAX}), ints({t.axis})}, {out});
    } else if (op == "enlarge") {
      const int64_t p = (3 - t.from) / 2;
      b_.node("Pad", {args[0], ints({0, 0, p, p, 0, 0, p, p})}, {out});
    } else if (op == "pool_avg" || op == "pool_max") {
      auto n = b_.node(op == "pool_avg" ? "AveragePool" : "MaxPool", args, {out});
      n.attr("kernel_shape", std::vector<int64_t>{3, 3}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
      if (op == "pool_avg") n.attr("count_include_pad", int64_t{1});
    } else if (op == "conv") {
      const KernelShape k = kernel_shape(*t.args[1], [&](const std::string& leaf) {
        auto it = leaves_.find(leaf);
        if (it == leaves_.end()) throw Error("term kernel: leaf '" + leaf + "' has no value");
        return it->second.shape();
      });
      const int64_t group = t.group == 0 ? k.filters : t.group;  // depthwise: one group per filter
      const std::string conv_out = t.relu ? out + ".conv" : out;
      auto n = b_.node("Conv", args, {conv_out});
      n.attr("group", group).attr("strides", std::vector<int64_t>{t.stride, t.stride});
      if (t.same) n.attr("pads", std::vector<int64_t>{(k.height - 1) / 2, (k.width - 1) / 2, (k.height - 1) / 2, (k.width - 1) / 2});
      if (t.relu) b_.node("Relu", {conv_out}, {out});
    } else {
      throw Error("term operator '" + op + "' is not known");
    }
    return out;
  }

  ModelBuilder& b_;
  const std::map<std::string, Tensor>& leaves_;
  std::map<const Term*, std::string> written_;
  int next_ = 0;
};

}  // namespace

Graph term_model(const std::vector<TermRef>& terms, const std::map<std::string, Tensor>& leaves) {
  ModelBuilder b("terms", 17);
  for (const auto& [name, value] : leaves) b.input(name, value.dtype(), value.shape());
  TermWriter writer(b, leaves);
  for (const TermRef& t : terms) {
    const std::string v = writer.write(t);
    // Every output its own value: a term that is a leaf, or one shared by two outputs, is copied.
    b.node("Identity", {v}, {"out" + std::to_string(&t - terms.data())});
    b.output("out" + std::to_string(&t - terms.data()), DType::Float64, Shape{});
  }
  Graph g = import_onnx_bytes(b.serialize(), "terms", {.onnx_checker = false});
  bind_input_shapes(g, {});
  infer_shapes(g);
  return g;
}

std::vector<Tensor> evaluate(const std::vector<TermRef>& terms, const std::map<std::string, Tensor>& leaves) {
  return run_reference(term_model(terms, leaves), leaves);
}

}  // namespace kiln::subst
