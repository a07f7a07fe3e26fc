// The ai.onnx.preview.training optimizers Adagrad, Momentum and Adam as tensor expressions.
#include <functional>
#include <string>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te::misc {
namespace {

// Inputs R, T, then n tensors per group (X, G, state groups); outputs n new X, then n per state group.
// Every output is an elementwise stage over X's shape; new X reads the new state stages.
struct OptimizerTensors {
  std::vector<Expr> idx;
  DType ct;     // compute dtype
  Expr r, t;    // learning rate and update count (as ct)
  Expr t_int;   // update count (Int64)
  Expr x, g;    // values at idx, in ct
  std::vector<TensorRef> state;  // the state inputs of this tensor
};

double required_float(const LowerContext& c, const char* name) {
  if (!c.node().has_attr(name)) c.fail(std::string("missing required attribute '") + name + "'");
  return c.node().attr_float(name, 0.0);
}

// Builds the state stages with `new_state(k, o)` and the new X with `new_x(o, state_stages)`.
using StateFn = std::function<Expr(size_t k, const OptimizerTensors& o)>;
using StepFn = std::function<Expr(const OptimizerTensors& o, const std::vector<Expr>& new_state)>;

void lower_optimizer(LowerContext& c, int state_groups, const StateFn& new_state, const StepFn& new_x) {
  int64_t groups = 2 + state_groups;
  int64_t n = (static_cast<int64_t>(c.num_inputs()) - 2) / groups;
  for (int64_t i = 0; i < n; ++i) {
    auto in = [&](int64_t group) { return c.input(static_cast<size_t>(2 + group * n + i)); };
    const TensorRef& x = in(0);
    DType dt = x->dtype, ct = compute_dtype(dt);
    auto bind = [&](const std::vector<Expr>& idx) {
      OptimizerTensors o;
      o.idx = idx;
      o.ct = ct;
      o.r = cast(ct, scalar_of(c.input(0)));
      o.t_int = cast(DType::Int64, scalar_of(c.input(1)));
      o.t = cast(ct, o.t_int);
      o.x = cast(ct, at(x, idx));
      o.g = cast(ct, at(in(1), idx));
      for (int s = 0; s < state_groups; ++s) o.state.push_back(in(2 + s));
      return o;
    };
    std::vector<TensorRef> states;
    for (int s = 0; s < state_groups; ++s)
      states.push_back(compute(c.name("state" + std::to_string(s) + "_" + std::to_string(i)), "elementwise", dt,
                               x->shape, [&](const std::vector<Expr>& idx) {
                                 return cast(dt, new_state(static_cast<size_t>(s), bind(idx)));
                               }));
    TensorRef nx = compute(c.name("x" + std::to_string(i)), "elementwise", dt, x->shape,
                           [&](const std::vector<Expr>& idx) {
                             std::vector<Expr> sv;
                             for (const TensorRef& s : states) sv.push_back(cast(ct, at(s, idx)));
                             return cast(dt, new_x(bind(idx), sv));
                           });
    c.set_output(static_cast<size_t>(i), nx);
    for (int s = 0; s < state_groups; ++s) c.set_output(static_cast<size_t>((1 + s) * n + i), states[s]);
  }
}

Expr state_at(const OptimizerTensors& o, size_t k) { return cast(o.ct, at(o.state[k], o.idx)); }

void lower_adagrad(LowerContext& c) {
  double decay = c.node().attr_float("decay_factor", 0.0);
  double epsilon = c.node().attr_float("epsilon", 1e-6);
  double norm = c.node().attr_float("norm_coefficient", 0.0);
  auto g_reg = [norm](const OptimizerTensors& o) { return fimm(norm, o.ct) * o.x + o.g; };
  lower_optimizer(
      c, 1,
      [&](size_t, const OptimizerTensors& o) {
        Expr gr = g_reg(o);
        return state_at(o, 0) + gr * gr;
      },
      [&](const OptimizerTensors& o, const std::vector<Expr>& h) {
        Expr rate = o.r / (fimm(1.0, o.ct) + o.t * fimm(decay, o.ct));
        return o.x - rate * g_reg(o) / (unary(ExprOp::Sqrt, h[0]) + fimm(epsilon, o.ct));
      });
}

// The gradient's coefficient is 1 on the first update (T = 0), beta afterwards.
void lower_momentum(LowerContext& c) {
  double alpha = required_float(c, "alpha"), beta = required_float(c, "beta");
  double norm = required_float(c, "norm_coefficient");
  std::string mode = c.node().attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov") c.fail("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  bool nesterov = mode == "nesterov";
  auto g_reg = [norm](const OptimizerTensors& o) { return fimm(norm, o.ct) * o.x + o.g; };
  lower_optimizer(
      c, 1,
      [&](size_t, const OptimizerTensors& o) {
        Expr coeff = select(o.t_int > int_imm(0), fimm(beta, o.ct), fimm(1.0, o.ct));
        return fimm(alpha, o.ct) * state_at(o, 0) + coeff * g_reg(o);
      },
      [&](const OptimizerTensors& o, const std::vector<Expr>& v) {
        if (nesterov) return o.x - o.r * (g_reg(o) + fimm(alpha, o.ct) * v[0]);
        return o.x - o.r * v[0];
      });
}

void lower_adam(LowerContext& c) {
  double alpha = c.node().attr_float("alpha", 0.9), beta = c.node().attr_float("beta", 0.999);
  double epsilon = c.node().attr_float("epsilon", 1e-6);
  double norm = c.node().attr_float("norm_coefficient", 0.0);
  double norm_post = c.node().attr_float("norm_coefficient_post", 0.0);
  auto g_reg = [norm](const OptimizerTensors& o) { return fimm(norm, o.ct) * o.x + o.g; };
  lower_optimizer(
      c, 2,
      [&](size_t k, const OptimizerTensors& o) {
        Expr gr = g_reg(o);
        if (k == 0) return fimm(alpha, o.ct) * state_at(o, 0) + fimm(1.0 - alpha, o.ct) * gr;
        return fimm(beta, o.ct) * state_at(o, 1) + fimm(1.0 - beta, o.ct) * gr * gr;
      },
      [&](const OptimizerTensors& o, const std::vector<Expr>& vh) {
        // Bias correction applies from the second update on.
        Expr one = fimm(1.0, o.ct);
        Expr corrected = o.r * unary(ExprOp::Sqrt, one - binary(ExprOp::Pow, fimm(beta, o.ct), o.t)) /
                         (one - binary(ExprOp::Pow, fimm(alpha, o.ct), o.t));
        Expr rate = select(o.t_int > int_imm(0), corrected, o.r);
        Expr x_new = o.x - rate * vh[0] / (unary(ExprOp::Sqrt, vh[1]) + fimm(epsilon, o.ct));
        return fimm(1.0 - norm_post, o.ct) * x_new;
      });
}

OpLowering training(const std::string& op_type, void (*f)(LowerContext&)) {
  return {op_type, "ai.onnx.preview.training", f};
}

}  // namespace

void register_training_optimizer_lowerings(LoweringRegistry& r) {
  r.add(training("Adagrad", lower_adagrad));
  r.add(training("Momentum", lower_momentum));
  r.add(training("Adam", lower_adam));
}

}  // namespace kiln::te::misc
