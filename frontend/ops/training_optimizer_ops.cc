// The ai.onnx.preview.training optimizers Adagrad, Momentum and Adam: one update step of n tensors.
#include <cmath>
#include <functional>
#include <string>

#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

// The optimizers update n tensors at once. Inputs: R (learning rate), T (update count), then n tensors
// per group X, G, then the state groups; outputs: n new X, then n per state group. The per-element rule
// gets r, t, x, g and the state values (updated in place) and returns the new x.
using OptimizerRule = std::function<double(double r, int64_t t, double x, double g, double* state)>;

struct OptimizerSpec {
  std::string name;
  int state_groups;
  std::function<OptimizerRule(const Node&)> make_rule;  // reads (and checks) the attributes
  double flops_per_element;
};

int64_t optimized_tensor_count(const Node& node, int state_groups) {
  int64_t groups = 2 + state_groups;
  int64_t tensors = static_cast<int64_t>(node.inputs.size()) - 2;
  if (tensors <= 0 || tensors % groups != 0)
    fail(node, "expected R, T and " + std::to_string(groups) + " groups of n tensors, got " +
                   std::to_string(node.inputs.size()) + " inputs");
  if (static_cast<int64_t>(node.outputs.size()) > tensors / groups * (1 + state_groups))
    fail(node, "too many outputs");
  return tensors / groups;
}

OpDef optimizer_op(OptimizerSpec spec) {
  OpDef d;
  d.op_type = spec.name;
  d.domain = "ai.onnx.preview.training";
  d.infer = [spec](InferContext& c) {
    int64_t n = optimized_tensor_count(c.node(), spec.state_groups);
    spec.make_rule(c.node());
    for (size_t i = 0; i < c.num_inputs(); ++i) c.require_input(i, i == 0 ? "R" : i == 1 ? "T" : "tensor");
    require_float_input(c, 0, "R");
    require_integer_input(c, 1, "T");
    if (num_elements(c.shape(0)) != 1 || num_elements(c.shape(1)) != 1) c.fail("R and T must be scalars");
    for (int64_t i = 0; i < n; ++i) {
      size_t x = static_cast<size_t>(2 + i);
      require_float_input(c, x, "X");
      for (int group = 1; group < 2 + spec.state_groups; ++group) {
        size_t other = static_cast<size_t>(2 + group * n + i);
        if (c.dtype(other) != c.dtype(x) || c.shape(other) != c.shape(x))
          c.fail("input " + std::to_string(other) + " must match X " + std::to_string(i) + " (" +
                 dtype_name(c.dtype(x)) + " " + shape_str(c.shape(x)) + ")");
      }
      for (int group = 0; group < 1 + spec.state_groups; ++group)
        c.set_output(static_cast<size_t>(group * n + i), c.dtype(x), c.shape(x));
    }
  };
  d.eval = [spec](EvalContext& c) {
    int64_t n = optimized_tensor_count(c.node(), spec.state_groups);
    OptimizerRule rule = spec.make_rule(c.node());
    double r = c.input(0).get_double(0);
    int64_t t = c.input(1).get_int(0);
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& x = c.input(static_cast<size_t>(2 + i));
      const Tensor& g = c.input(static_cast<size_t>(2 + n + i));
      std::vector<Tensor> outs(static_cast<size_t>(1 + spec.state_groups), Tensor(x.dtype(), x.shape()));
      std::vector<double> state(static_cast<size_t>(spec.state_groups));
      for (int64_t e = 0; e < x.size(); ++e) {
        for (int s = 0; s < spec.state_groups; ++s) state[s] = c.input(static_cast<size_t>(2 + (2 + s) * n + i)).get_double(e);
        outs[0].set_double(e, rule(r, t, x.get_double(e), g.get_double(e), state.data()));
        for (int s = 0; s < spec.state_groups; ++s) outs[1 + s].set_double(e, state[s]);
      }
      for (int group = 0; group < 1 + spec.state_groups; ++group)
        c.set_output(static_cast<size_t>(group * n + i), std::move(outs[group]));
    }
  };
  double per_element = spec.flops_per_element;
  int groups = 2 + spec.state_groups;
  d.flops = [per_element, groups](const NodeShapes& s) {
    double all_tensors = 0;  // every group has the elements of the X group
    for (size_t i = 2; i < s.in.size(); ++i) all_tensors += static_cast<double>(num_elements(s.in[i]));
    return per_element * all_tensors / groups;
  };
  return d;
}

double required_float(const Node& node, const char* name) {
  if (!node.has_attr(name)) fail(node, std::string("missing required attribute '") + name + "'");
  return node.attr_float(name, 0.0);
}

OpDef adagrad_op() {
  return optimizer_op({"Adagrad", 1,
                       [](const Node& node) -> OptimizerRule {
                         double decay = node.attr_float("decay_factor", 0.0);
                         double epsilon = node.attr_float("epsilon", 1e-6);
                         double norm = node.attr_float("norm_coefficient", 0.0);
                         return [=](double r, int64_t t, double x, double g, double* h) {
                           double rate = r / (1.0 + static_cast<double>(t) * decay);
                           double g_reg = norm * x + g;
                           h[0] += g_reg * g_reg;
                           return x - rate * g_reg / (std::sqrt(h[0]) + epsilon);
                         };
                       },
                       11.0});
}

// Momentum: the gradient's coefficient is 1 on the first update (T = 0), beta afterwards.
OpDef momentum_op() {
  return optimizer_op({"Momentum", 1,
                       [](const Node& node) -> OptimizerRule {
                         double alpha = required_float(node, "alpha");
                         double beta = required_float(node, "beta");
                         double norm = required_float(node, "norm_coefficient");
                         std::string mode = node.attr_string("mode", "");
                         if (mode != "standard" && mode != "nesterov")
                           fail(node, "mode must be 'standard' or 'nesterov', got '" + mode + "'");
                         bool nesterov = mode == "nesterov";
                         return [=](double r, int64_t t, double x, double g, double* v) {
                           double g_reg = norm * x + g;
                           v[0] = alpha * v[0] + (t > 0 ? beta : 1.0) * g_reg;
                           return nesterov ? x - r * (g_reg + alpha * v[0]) : x - r * v[0];
                         };
                       },
                       9.0});
}

OpDef adam_op() {
  return optimizer_op({"Adam", 2,
                       [](const Node& node) -> OptimizerRule {
                         double alpha = node.attr_float("alpha", 0.9);
                         double beta = node.attr_float("beta", 0.999);
                         double epsilon = node.attr_float("epsilon", 1e-6);
                         double norm = node.attr_float("norm_coefficient", 0.0);
                         double norm_post = node.attr_float("norm_coefficient_post", 0.0);
                         return [=](double r, int64_t t, double x, double g, double* vh) {
                           double g_reg = norm * x + g;
                           vh[0] = alpha * vh[0] + (1.0 - alpha) * g_reg;
                           vh[1] = beta * vh[1] + (1.0 - beta) * g_reg * g_reg;
                           // Bias correction applies from the second update on.
                           double rate = r;
                           if (t > 0) {
                             double tt = static_cast<double>(t);
                             rate = r * std::sqrt(1.0 - std::pow(beta, tt)) / (1.0 - std::pow(alpha, tt));
                           }
                           double x_new = x - rate * vh[0] / (std::sqrt(vh[1]) + epsilon);
                           return (1.0 - norm_post) * x_new;
                         };
                       },
                       16.0});
}

}  // namespace

void register_training_optimizer_ops(OpRegistry& r) {
  r.add(adagrad_op());
  r.add(momentum_op());
  r.add(adam_op());
}

}  // namespace kiln::misc
