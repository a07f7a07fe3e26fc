#include "scheduler/te/te_eval.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "frontend/ir/error.h"
#include "frontend/ops/op_registry.h"

namespace kiln::te {
namespace {

// A scalar: `f` for float dtypes, `i` for the others (bool as 0/1, uint64 as its bit pattern).
struct Val {
  double f = 0;
  int64_t i = 0;
};

double as_double(const Val& v, DType t) {
  if (is_float(t)) return v.f;
  if (t == DType::UInt64) return static_cast<double>(static_cast<uint64_t>(v.i));
  return static_cast<double>(v.i);
}

int64_t float_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

Val make_val(DType t, double f, int64_t i) {
  Val v;
  if (is_float(t)) v.f = f;
  else v.i = wrap_to_dtype(i, t);
  return v;
}

double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? (exp % 2 ? -1 : 1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  while (exp) {
    if (exp & 1) r *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(r);
}

class Evaluator {
 public:
  std::unordered_map<const TensorNode*, const Tensor*> buffers;
  std::unordered_map<const ExprNode*, int64_t> vars;

  Val eval(const ExprNode* e) {
    switch (e->op) {
      case ExprOp::IntImm: return make_val(e->dtype, static_cast<double>(e->int_value), e->int_value);
      case ExprOp::FloatImm: return make_val(e->dtype, e->float_value, 0);
      case ExprOp::Var: {
        auto it = vars.find(e);
        if (it == vars.end()) throw Error("tensor expression: unbound variable " + e->name);
        return make_val(DType::Int64, 0, it->second);
      }
      case ExprOp::Load: return load(e);
      case ExprOp::Cast: return cast(eval(e->args[0].get()), e->args[0]->dtype, e->dtype);
      case ExprOp::Reinterpret: return reinterpret(eval(e->args[0].get()), e->args[0]->dtype, e->dtype);
      case ExprOp::Select: return eval(e->args[0].get()).i ? eval(e->args[1].get()) : eval(e->args[2].get());
      default: break;
    }
    if (is_unary(e->op)) return unary(e->op, eval(e->args[0].get()), e->args[0]->dtype, e->dtype);
    // Short-circuit logic so guards protect what they guard.
    if (e->op == ExprOp::And && !eval(e->args[0].get()).i) return make_val(DType::Bool, 0, 0);
    if (e->op == ExprOp::Or && eval(e->args[0].get()).i) return make_val(DType::Bool, 0, 1);
    return binary(e->op, eval(e->args[0].get()), eval(e->args[1].get()), e->args[0]->dtype, e->dtype);
  }

 private:
  Val load(const ExprNode* e) {
    auto it = buffers.find(e->tensor.get());
    if (it == buffers.end()) throw Error("tensor expression: '" + e->tensor->name + "' is not computed yet");
    const Tensor& t = *it->second;
    int64_t flat = 0;
    for (size_t k = 0; k < e->args.size(); ++k) {
      int64_t idx = eval(e->args[k].get()).i;
      if (idx < 0 || idx >= t.shape()[k])
        throw Error(fmt::format("tensor expression: load from '{}': index {} out of range [0, {}) at axis {}",
                                e->tensor->name, idx, t.shape()[k], k));
      flat = flat * t.shape()[k] + idx;
    }
    return is_float(t.dtype()) ? make_val(t.dtype(), t.get_double(flat), 0) : make_val(t.dtype(), 0, t.get_int(flat));
  }

  static Val cast(const Val& v, DType from, DType to) {
    if (to == DType::Bool) return make_val(to, 0, is_float(from) ? v.f != 0.0 : v.i != 0);
    if (is_float(to)) return make_val(to, round_to_dtype(as_double(v, from), to), 0);
    if (is_float(from)) return make_val(to, 0, float_to_int(v.f));
    return make_val(to, 0, v.i);
  }

  static Val reinterpret(const Val& v, DType from, DType to) {
    uint64_t bits;
    if (from == DType::Float32) bits = std::bit_cast<uint32_t>(static_cast<float>(v.f));
    else if (from == DType::Float64) bits = std::bit_cast<uint64_t>(v.f);
    else bits = static_cast<uint64_t>(v.i);
    if (to == DType::Float32) return make_val(to, std::bit_cast<float>(static_cast<uint32_t>(bits)), 0);
    if (to == DType::Float64) return make_val(to, std::bit_cast<double>(bits), 0);
    return make_val(to, 0, static_cast<int64_t>(bits));
  }

  static Val unary(ExprOp op, const Val& a, DType in, DType out) {
    if (op == ExprOp::IsNaN) return make_val(out, 0, std::isnan(a.f));
    if (op == ExprOp::IsInf) return make_val(out, 0, std::isinf(a.f));
    if (!is_float(in)) {
      switch (op) {
        case ExprOp::Neg: return make_val(out, 0, static_cast<int64_t>(0 - static_cast<uint64_t>(a.i)));
        case ExprOp::Abs: return make_val(out, 0, a.i < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(a.i)) : a.i);
        case ExprOp::Not: return make_val(out, 0, !a.i);
        case ExprOp::BitNot: return make_val(out, 0, ~a.i);
        default: throw Error(std::string("tensor expression: ") + expr_op_name(op) + " on " + dtype_name(in));
      }
    }
    double x = a.f, r = 0;
    switch (op) {
      case ExprOp::Neg: r = -x; break;
      case ExprOp::Abs: r = std::fabs(x); break;
      case ExprOp::Exp: r = std::exp(x); break;
      case ExprOp::Log: r = std::log(x); break;
      case ExprOp::Sqrt: r = std::sqrt(x); break;
      case ExprOp::Tanh: r = std::tanh(x); break;
      case ExprOp::Erf: r = std::erf(x); break;
      case ExprOp::Sigmoid: r = 1.0 / (1.0 + std::exp(-x)); break;
      case ExprOp::Sin: r = std::sin(x); break;
      case ExprOp::Cos: r = std::cos(x); break;
      case ExprOp::Tan: r = std::tan(x); break;
      case ExprOp::Asin: r = std::asin(x); break;
      case ExprOp::Acos: r = std::acos(x); break;
      case ExprOp::Atan: r = std::atan(x); break;
      case ExprOp::Sinh: r = std::sinh(x); break;
      case ExprOp::Cosh: r = std::cosh(x); break;
      case ExprOp::Asinh: r = std::asinh(x); break;
      case ExprOp::Acosh: r = std::acosh(x); break;
      case ExprOp::Atanh: r = std::atanh(x); break;
      case ExprOp::Floor: r = std::floor(x); break;
      case ExprOp::Ceil: r = std::ceil(x); break;
      case ExprOp::Round: r = std::nearbyint(x); break;  // half to even in the default rounding mode
      default: throw Error(std::string("tensor expression: ") + expr_op_name(op) + " on " + dtype_name(in));
    }
    return make_val(out, r, 0);
  }

  static Val binary(ExprOp op, const Val& a, const Val& b, DType in, DType out) {
    if (is_float(in)) {
      double x = a.f, y = b.f;
      switch (op) {
        case ExprOp::Add: return make_val(out, x + y, 0);
        case ExprOp::Sub: return make_val(out, x - y, 0);
        case ExprOp::Mul: return make_val(out, x * y, 0);
        case ExprOp::Div: return make_val(out, x / y, 0);
        case ExprOp::Mod:
        case ExprOp::FMod: return make_val(out, std::fmod(x, y), 0);
        case ExprOp::FloorDiv: return make_val(out, std::floor(x / y), 0);
        case ExprOp::FloorMod: {
          double m = std::fmod(x, y);
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return make_val(out, m, 0);
        }
        case ExprOp::Min: return make_val(out, nan_min(x, y), 0);
        case ExprOp::Max: return make_val(out, nan_max(x, y), 0);
        case ExprOp::Pow: return make_val(out, std::pow(x, y), 0);
        case ExprOp::Eq: return make_val(out, 0, x == y);
        case ExprOp::Ne: return make_val(out, 0, x != y);
        case ExprOp::Lt: return make_val(out, 0, x < y);
        case ExprOp::Le: return make_val(out, 0, x <= y);
        case ExprOp::Gt: return make_val(out, 0, x > y);
        case ExprOp::Ge: return make_val(out, 0, x >= y);
        default: throw Error(std::string("tensor expression: ") + expr_op_name(op) + " on " + dtype_name(in));
      }
    }
    const bool u = !is_signed(in);
    const uint64_t ux = static_cast<uint64_t>(a.i), uy = static_cast<uint64_t>(b.i);
    const int64_t x = a.i, y = b.i;
    auto lt = [&](void) { return u ? ux < uy : x < y; };
    switch (op) {
      case ExprOp::Add: return make_val(out, 0, static_cast<int64_t>(ux + uy));
      case ExprOp::Sub: return make_val(out, 0, static_cast<int64_t>(ux - uy));
      case ExprOp::Mul: return make_val(out, 0, static_cast<int64_t>(ux * uy));
      case ExprOp::Div:
      case ExprOp::Mod:
      case ExprOp::FloorDiv:
      case ExprOp::FloorMod: {
        if (y == 0) throw Error("tensor expression: integer division by zero");
        if (u) return make_val(out, 0, static_cast<int64_t>(op == ExprOp::Div || op == ExprOp::FloorDiv ? ux / uy : ux % uy));
        if (x == std::numeric_limits<int64_t>::min() && y == -1)
          return make_val(out, 0, op == ExprOp::Div || op == ExprOp::FloorDiv ? x : 0);
        int64_t q = x / y, r = x % y;
        if (op == ExprOp::Div) return make_val(out, 0, q);
        if (op == ExprOp::Mod) return make_val(out, 0, r);
        bool adjust = r != 0 && ((r < 0) != (y < 0));
        if (op == ExprOp::FloorDiv) return make_val(out, 0, adjust ? q - 1 : q);
        return make_val(out, 0, adjust ? r + y : r);
      }
      case ExprOp::Min: return make_val(out, 0, lt() ? x : y);
      case ExprOp::Max: return make_val(out, 0, lt() ? y : x);
      case ExprOp::Pow: return make_val(out, 0, int_pow(x, y));
      case ExprOp::And: return make_val(out, 0, x && y);
      case ExprOp::Or: return make_val(out, 0, x || y);
      case ExprOp::Xor: return make_val(out, 0, (x != 0) != (y != 0));
      case ExprOp::Eq: return make_val(out, 0, x == y);
      case ExprOp::Ne: return make_val(out, 0, x != y);
      case ExprOp::Lt: return make_val(out, 0, lt());
      case ExprOp::Le: return make_val(out, 0, !(u ? uy < ux : y < x));
      case ExprOp::Gt: return make_val(out, 0, u ? uy < ux : y < x);
      case ExprOp::Ge: return make_val(out, 0, !lt());
      case ExprOp::BitAnd: return make_val(out, 0, x & y);
      case ExprOp::BitOr: return make_val(out, 0, x | y);
      case ExprOp::BitXor: return make_val(out, 0, x ^ y);
      case ExprOp::Shl: return make_val(out, 0, uy >= 64 ? 0 : static_cast<int64_t>(ux << uy));
      case ExprOp::Shr: {
        uint64_t bits = static_cast<uint64_t>(wrap_to_dtype(x, in)) & (dtype_size(in) == 8 ? ~0ull : ((1ull << (8 * dtype_size(in))) - 1));
        return make_val(out, 0, uy >= 64 ? 0 : static_cast<int64_t>(bits >> uy));
      }
      case ExprOp::Dot4U8S8:
      case ExprOp::Dot4S8S8: {
        int64_t sum = 0;
        for (int j = 0; j < 4; ++j) {
          const auto a_byte = static_cast<uint8_t>((ux >> (8 * j)) & 0xff);
          const int64_t a = op == ExprOp::Dot4U8S8 ? a_byte : static_cast<int8_t>(a_byte);
          sum += a * static_cast<int8_t>((uy >> (8 * j)) & 0xff);
        }
        return make_val(out, 0, wrap_to_dtype(sum, DType::Int32));
      }
      default: throw Error(std::string("tensor expression: ") + expr_op_name(op) + " on " + dtype_name(in));
    }
  }
};

Val combine(Reducer r, const Val& acc, const Val& v, DType t) {
  if (is_float(t)) {
    switch (r) {
      case Reducer::Sum: return make_val(t, acc.f + v.f, 0);
      case Reducer::Prod: return make_val(t, acc.f * v.f, 0);
      case Reducer::Min: return make_val(t, nan_min(acc.f, v.f), 0);
      case Reducer::Max: return make_val(t, nan_max(acc.f, v.f), 0);
      case Reducer::None: break;
    }
  } else {
    bool u = !is_signed(t);
    auto lt = [&](int64_t a, int64_t b) { return u ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b; };
    switch (r) {
      case Reducer::Sum: return make_val(t, 0, static_cast<int64_t>(static_cast<uint64_t>(acc.i) + static_cast<uint64_t>(v.i)));
      case Reducer::Prod: return make_val(t, 0, static_cast<int64_t>(static_cast<uint64_t>(acc.i) * static_cast<uint64_t>(v.i)));
      case Reducer::Min: return lt(v.i, acc.i) ? v : acc;
      case Reducer::Max: return lt(acc.i, v.i) ? v : acc;
      case Reducer::None: break;
    }
  }
  return v;
}

Tensor eval_extern(const Stage& s, Evaluator& ev) {
  const OpDef* op = find_op(s.extern_node->domain, s.extern_node->op_type);
  if (!op) throw Unsupported(s.extern_node->label() + ": no reference kernel");
  std::vector<const Tensor*> ins;
  for (const TensorRef& t : s.extern_inputs) ins.push_back(t ? ev.buffers.at(t.get()) : nullptr);
  EvalContext ec(*s.extern_node, std::move(ins));
  op->eval(ec);
  return ec.outputs().at(static_cast<size_t>(s.extern_output));
}

Tensor eval_stage(const Stage& s, Evaluator& ev) {
  if (s.is_extern()) return eval_extern(s, ev);
  Tensor out(s.dtype, s.shape);
  std::vector<int64_t> idx(s.axes.size(), 0);
  std::vector<int64_t> ridx(s.reduce_axes.size(), 0);
  int64_t rsize = 1;
  for (const auto& iv : s.reduce_axes) rsize *= iv.extent;
  for (int64_t flat = 0; flat < out.size(); ++flat) {
    for (size_t k = 0; k < idx.size(); ++k) ev.vars[s.axes[k].get()] = idx[k];
    Val v;
    if (s.reducer == Reducer::None) {
      v = ev.eval(s.body.get());
    } else {
      v = ev.eval(s.init.get());
      std::fill(ridx.begin(), ridx.end(), 0);
      for (int64_t r = 0; r < rsize; ++r) {
        for (size_t k = 0; k < ridx.size(); ++k) ev.vars[s.reduce_axes[k].var.get()] = ridx[k];
        v = combine(s.reducer, v, ev.eval(s.body.get()), s.dtype);
        for (int64_t k = static_cast<int64_t>(ridx.size()) - 1; k >= 0; --k) {
          if (++ridx[k] < s.reduce_axes[k].extent) break;
          ridx[k] = 0;
        }
      }
    }
    if (is_float(s.dtype)) out.set_double(flat, v.f);
    else out.set_int(flat, v.i);
    for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0; --k) {
      if (++idx[k] < s.shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<Tensor> evaluate(const ComputeDAG& dag, const std::map<const TensorNode*, Tensor>& inputs) {
  Evaluator ev;
  std::map<const TensorNode*, Tensor> results;
  for (const TensorRef& p : dag.placeholders) {
    if (p->constant) {
      ev.buffers[p.get()] = p->constant.get();
      continue;
    }
    auto it = inputs.find(p.get());
    if (it == inputs.end()) throw Error("tensor expression: no value for placeholder '" + p->name + "'");
    ev.buffers[p.get()] = &it->second;
  }
  for (const TensorRef& t : dag.tensors) {
    Tensor value = eval_stage(*t->stage, ev);
    auto [it, ok] = results.emplace(t.get(), std::move(value));
    ev.buffers[t.get()] = &it->second;
  }
  std::vector<Tensor> outs;
  for (const TensorRef& o : dag.outputs) outs.push_back(*ev.buffers.at(o.get()));
  return outs;
}

}  // namespace kiln::te
