#include "frontend/subst/term.h"

#include <algorithm>
#include <functional>

#include "frontend/ir/error.h"

namespace kiln::subst {
namespace {

TermRef make(const std::string& op, std::vector<TermRef> args, const std::function<void(Term&)>& set = {}) {
  auto t = std::make_shared<Term>();
  t->op = op;
  t->args = std::move(args);
  if (set) set(*t);
  return t;
}

}  // namespace

TermRef leaf(const std::string& name) {
  return make("leaf", {}, [&](Term& t) { t.name = name; });
}
TermRef ewadd(TermRef a, TermRef b) { return make("ewadd", {std::move(a), std::move(b)}); }
TermRef ewmul(TermRef a, TermRef b) { return make("ewmul", {std::move(a), std::move(b)}); }
TermRef smul(TermRef x, TermRef scalar) { return make("smul", {std::move(x), std::move(scalar)}); }
TermRef biasadd(TermRef x, TermRef b) { return make("biasadd", {std::move(x), std::move(b)}); }
TermRef transpose(TermRef x) { return make("transpose", {std::move(x)}); }
TermRef matmul(TermRef a, TermRef b) { return make("matmul", {std::move(a), std::move(b)}); }
TermRef conv(TermRef x, TermRef w, bool same, bool relu, int64_t group, int64_t stride) {
  return make("conv", {std::move(x), std::move(w)}, [&](Term& t) {
    t.same = same;
    t.relu = relu;
    t.group = group;
    t.stride = stride;
  });
}
TermRef conv_bias(TermRef x, TermRef w, TermRef b, bool same, bool relu, int64_t group, int64_t stride) {
  return make("conv", {std::move(x), std::move(w), std::move(b)}, [&](Term& t) {
    t.same = same;
    t.relu = relu;
    t.group = group;
    t.stride = stride;
  });
}
TermRef enlarge(TermRef w, int64_t from) {
  return make("enlarge", {std::move(w)}, [&](Term& t) { t.from = from; });
}
TermRef relu(TermRef x) { return make("relu", {std::move(x)}); }
TermRef pool_avg(TermRef x) { return make("pool_avg", {std::move(x)}); }
TermRef pool_max(TermRef x) { return make("pool_max", {std::move(x)}); }
TermRef concat(int64_t axis, TermRef a, TermRef b) {
  return make("concat", {std::move(a), std::move(b)}, [&](Term& t) { t.axis = axis; });
}
// split0 or split1 at `at`, or (at -1) at the extent of `leaf` along `leaf_axis`.
TermRef split(const std::string& op, int64_t axis, int64_t at, const std::string& leaf, int64_t leaf_axis, TermRef x) {
  return make(op, {std::move(x)}, [&](Term& t) {
    t.axis = axis;
    t.split_at = at;
    t.split_leaf = leaf;
    t.split_leaf_axis = leaf_axis;
  });
}

TermRef split0(int64_t axis, int64_t at, TermRef x) { return split("split0", axis, at, "x", -1, std::move(x)); }
TermRef split1(int64_t axis, int64_t at, TermRef x) { return split("split1", axis, at, "x", -1, std::move(x)); }
TermRef split0_at(int64_t axis, const std::string& leaf, int64_t leaf_axis, TermRef x) {
  return split("split0", axis, -1, leaf, leaf_axis, std::move(x));
}
TermRef split1_at(int64_t axis, const std::string& leaf, int64_t leaf_axis, TermRef x) {
  return split("split1", axis, -1, leaf, leaf_axis, std::move(x));
}

std::string to_string(const TermRef& t) {
  if (t->op == "leaf") return t->name;
  std::vector<std::string> params;
  if (t->op == "concat" || t->op == "split0" || t->op == "split1") params.push_back("axis " + std::to_string(t->axis));
  if (t->op == "split0" || t->op == "split1") {
    const int64_t leaf_axis = t->split_leaf_axis < 0 ? t->axis : t->split_leaf_axis;
    params.push_back(t->split_at >= 0 ? "at " + std::to_string(t->split_at)
                                      : "at extent(" + t->split_leaf + ", " + std::to_string(leaf_axis) + ")");
  }
  if (t->op == "conv") {
    if (!t->same) params.push_back("valid");
    if (t->relu) params.push_back("relu");
    if (t->group != 1) params.push_back(t->group == 0 ? "depthwise" : "group " + std::to_string(t->group));
    if (t->stride != 1) params.push_back("stride " + std::to_string(t->stride));
  }
  if (t->op == "enlarge") params.push_back("from " + std::to_string(t->from));
  std::string s = t->op;
  if (!params.empty()) {
    s += "[";
    for (size_t i = 0; i < params.size(); ++i) s += (i ? ", " : "") + params[i];
    s += "]";
  }
  s += "(";
  for (size_t i = 0; i < t->args.size(); ++i) s += (i ? ", " : "") + to_string(t->args[i]);
  return s + ")";
}

KernelShape kernel_shape(const Term& kernel, const std::function<Shape(const std::string&)>& leaf_shape) {
  if (kernel.op == "leaf") {
    const Shape s = leaf_shape(kernel.name);
    if (s.size() != 4) throw Error("term kernel '" + kernel.name + "' is not 4-d");
    return {s[0], s[2], s[3]};
  }
  if (kernel.op == "enlarge") {
    KernelShape k = kernel_shape(*kernel.args[0], leaf_shape);
    k.height = k.width = 3;
    return k;
  }
  if (kernel.op == "concat") {  // the extents along the axis add (axis 1, input channels, has none here)
    KernelShape a = kernel_shape(*kernel.args[0], leaf_shape);
    const KernelShape b = kernel_shape(*kernel.args[1], leaf_shape);
    if (kernel.axis == 0) a.filters += b.filters;
    if (kernel.axis == 2) a.height += b.height;
    if (kernel.axis == 3) a.width += b.width;
    return a;
  }
  // Element-wise operators keep their first operand's shape.
  if (kernel.op == "ewadd" || kernel.op == "ewmul" || kernel.op == "smul") return kernel_shape(*kernel.args[0], leaf_shape);
  throw Error("term " + to_string(std::make_shared<Term>(kernel)) + " is not a kernel");
}

std::vector<std::string> leaves(const TermRef& t) {
  std::vector<std::string> out;
  std::function<void(const TermRef&)> walk = [&](const TermRef& u) {
    if (u->op == "leaf") {
      if (std::find(out.begin(), out.end(), u->name) == out.end()) out.push_back(u->name);
      return;
    }
    for (const TermRef& a : u->args) walk(a);
  };
  walk(t);
  return out;
}

}  // namespace kiln::subst
