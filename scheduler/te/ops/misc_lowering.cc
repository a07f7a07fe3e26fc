// The misc family's lowerings and entry point: SwiGLU, TensorScatter, BitCast, the ai.onnx.ml ops
// Binarizer and ArrayFeatureExtractor, the ai.onnx.preview.training optimizers, and the ops that are not
// loop nests (Det, NonMaxSuppression, NonZero, Unique) as extern stages. Sampling ops are in
// misc_sampling_lowering.cc, signal ops in misc_signal_lowering.cc. Semantics mirror frontend/ops/misc_*.cc.
#include <functional>
#include <string>

#include "scheduler/te/ops/misc_lowering_common.h"

namespace kiln::te {
namespace misc {
namespace {

std::vector<TensorRef> present_inputs(const LowerContext& c) {
  std::vector<TensorRef> ins;
  for (size_t i = 0; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? c.input(i) : nullptr);
  return ins;
}

// Ops that are not loop nests run their reference kernel: one extern stage per output.
OpLowering extern_lowering(const std::string& op_type) {
  return {op_type, "", [](LowerContext& c) {
            for (size_t i = 0; i < c.num_outputs(); ++i) {
              if (!c.has_output(i)) continue;
              c.set_output(i, extern_stage(c.name(c.num_outputs() > 1 ? "out" + std::to_string(i) : ""), c.node(),
                                           present_inputs(c), static_cast<int>(i), c.out_dtype(i), c.out_shape(i)));
            }
          }};
}

// ---- BitCast ----------------------------------------------------------------------------------------

bool is_bitwise_int(DType t) { return t == DType::Bool || is_integer(t); }

// Between integer dtypes of one width a bit cast is the wrapping conversion, a loop nest; anything
// involving floats (or a change of width) reinterprets bytes, which the expression language has no
// operation for, so it runs the reference kernel.
void lower_bitcast(LowerContext& c) {
  DType from = c.dtype(0), to = c.out_dtype(0);
  if (is_bitwise_int(from) && is_bitwise_int(to) && dtype_size(from) == dtype_size(to)) {
    const TensorRef& x = c.input(0);
    c.set_output(0, compute(c.name(), "elementwise", to, c.out_shape(0), [&](const std::vector<Expr>& idx) {
      // bool -> uint8 is 0/1; uint8 -> bool keeps any nonzero byte as true, as the bytes would.
      return cast(to, at(x, idx));
    }));
    return;
  }
  c.set_output(0, extern_stage(c.name(), c.node(), {c.input(0)}, 0, to, c.out_shape(0)));
}

// ---- SwiGLU -----------------------------------------------------------------------------------------

// Y = A * sigmoid(alpha * A) * B, computed in float32 for half types.
void lower_swiglu(LowerContext& c) {
  DType out = c.out_dtype(0), ct = compute_dtype(out);
  double alpha = c.node().attr_float("alpha", 1.0);
  const TensorRef& a = c.input(0);
  const TensorRef& b = c.input(1);
  c.set_output(0, compute(c.name(), "elementwise", out, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    Expr g = cast(ct, at(a, idx));
    Expr gate = g * unary(ExprOp::Sigmoid, fimm(alpha, ct) * g);
    return cast(out, gate * cast(ct, at(b, idx)));
  }));
}

// ---- TensorScatter ----------------------------------------------------------------------------------

// Each cache position p along the axis takes update row s where start + s lands on p (modulo the cache
// length when circular), start = write_indices[batch]; other positions keep the cache.
void lower_tensor_scatter(LowerContext& c) {
  const TensorRef& cache = c.input(0);
  const TensorRef& update = c.input(1);
  const Shape& shape = c.shape(0);
  int64_t axis = c.node().attr_int("axis", -2);
  if (axis < 0) axis += c.rank(0);
  bool circular = c.node().attr_string("mode", "linear") == "circular";
  int64_t cache_len = shape[axis], update_len = c.shape(1)[axis];
  const TensorRef* indices = c.has_input(2) ? &c.input(2) : nullptr;
  c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), shape, [&](const std::vector<Expr>& idx) {
    Expr start = indices ? cast(DType::Int64, at(*indices, {idx[0]})) : int_imm(0);
    Expr s = idx[axis] - start;
    if (circular) s = floormod(s, int_imm(cache_len));
    std::vector<Expr> src = idx;
    src[axis] = clamp_index(s, update_len);
    return select(in_range(s, 0, update_len), at(update, src), at(cache, idx));
  }));
}

// ---- ai.onnx.ml -------------------------------------------------------------------------------------

// 1 where x > threshold, else 0; compared in double like the reference (any numeric dtype).
void lower_binarizer(LowerContext& c) {
  DType t = c.out_dtype(0);
  double threshold = c.node().attr_float("threshold", 0.0);
  const TensorRef& x = c.input(0);
  c.set_output(0, compute(c.name(), "elementwise", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    Expr above = cast(DType::Float64, at(x, idx)) > fimm(threshold, DType::Float64);
    return select(above, const_of(t, 1), const_of(t, 0));
  }));
}

// Y[..., j] = X[..., indices.flat[j]]; the indices are data, so they are wrapped and clamped.
void lower_array_feature_extractor(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const TensorRef& ind = c.input(1);
  const Shape& out_shape = c.out_shape(0);
  int64_t n = c.shape(0).back();
  std::vector<int64_t> strides(ind->shape.size(), 1);
  for (size_t a = ind->shape.size(); a-- > 1;) strides[a - 1] = strides[a] * ind->shape[a];
  c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), out_shape, [&](const std::vector<Expr>& idx) {
    // Unravel the flat position j into the indices tensor's coordinates.
    Expr j = idx.back();
    std::vector<Expr> ii;
    for (size_t a = 0; a < ind->shape.size(); ++a)
      ii.push_back(floormod(floordiv(j, int_imm(strides[a])), int_imm(ind->shape[a])));
    Expr k = cast(DType::Int64, at(ind, ii));
    k = select(k < int_imm(0), k + n, k);
    std::vector<Expr> src;
    if (c.rank(0) > 1) src.assign(idx.begin(), idx.end() - 1);  // a 1-D X gave a leading axis of 1
    src.push_back(clamp_index(k, n));
    return at(x, src);
  }));
}

// ---- ai.onnx.preview.training: Adagrad, Momentum, Adam ----------------------------------------------

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
}  // namespace misc

void register_misc_lowerings(LoweringRegistry& r) {
  using namespace misc;
  // Gaussian elimination with pivoting, greedy suppression, compaction and sorting: data-dependent
  // control flow, not loop nests (the last three are usually folded at compile time anyway).
  r.add(extern_lowering("Det"));
  r.add(extern_lowering("NonMaxSuppression"));
  r.add(extern_lowering("NonZero"));
  r.add(extern_lowering("Unique"));
  r.add({"BitCast", "", lower_bitcast});
  r.add({"SwiGLU", "", lower_swiglu});
  r.add({"TensorScatter", "", lower_tensor_scatter});
  r.add({"Binarizer", "ai.onnx.ml", lower_binarizer});
  r.add({"ArrayFeatureExtractor", "ai.onnx.ml", lower_array_feature_extractor});
  r.add(training("Adagrad", lower_adagrad));
  r.add(training("Momentum", lower_momentum));
  r.add(training("Adam", lower_adam));
  register_sampling_lowerings(r);
  register_signal_lowerings(r);
}

}  // namespace kiln::te
