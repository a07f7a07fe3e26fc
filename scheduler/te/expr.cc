#include "scheduler/te/expr.h"

#include <fmt/format.h>

#include "frontend/ir/error.h"
#include "scheduler/te/compute.h"

namespace kiln::te {

const char* expr_op_name(ExprOp op) {
  switch (op) {
    case ExprOp::IntImm: return "int";
    case ExprOp::FloatImm: return "float";
    case ExprOp::Var: return "var";
    case ExprOp::Load: return "load";
    case ExprOp::Cast: return "cast";
    case ExprOp::Reinterpret: return "reinterpret";
    case ExprOp::Select: return "select";
    case ExprOp::Neg: return "neg";
    case ExprOp::Not: return "not";
    case ExprOp::Abs: return "abs";
    case ExprOp::Exp: return "exp";
    case ExprOp::Log: return "log";
    case ExprOp::Sqrt: return "sqrt";
    case ExprOp::Tanh: return "tanh";
    case ExprOp::Erf: return "erf";
    case ExprOp::Sigmoid: return "sigmoid";
    case ExprOp::Sin: return "sin";
    case ExprOp::Cos: return "cos";
    case ExprOp::Tan: return "tan";
    case ExprOp::Asin: return "asin";
    case ExprOp::Acos: return "acos";
    case ExprOp::Atan: return "atan";
    case ExprOp::Sinh: return "sinh";
    case ExprOp::Cosh: return "cosh";
    case ExprOp::Asinh: return "asinh";
    case ExprOp::Acosh: return "acosh";
    case ExprOp::Atanh: return "atanh";
    case ExprOp::Floor: return "floor";
    case ExprOp::Ceil: return "ceil";
    case ExprOp::Round: return "round";
    case ExprOp::IsNaN: return "isnan";
    case ExprOp::IsInf: return "isinf";
    case ExprOp::BitNot: return "bitnot";
    case ExprOp::Add: return "+";
    case ExprOp::Sub: return "-";
    case ExprOp::Mul: return "*";
    case ExprOp::Div: return "/";
    case ExprOp::Mod: return "%";
    case ExprOp::FloorDiv: return "floordiv";
    case ExprOp::FloorMod: return "floormod";
    case ExprOp::Min: return "min";
    case ExprOp::Max: return "max";
    case ExprOp::Pow: return "pow";
    case ExprOp::FMod: return "fmod";
    case ExprOp::And: return "&&";
    case ExprOp::Or: return "||";
    case ExprOp::Xor: return "xor";
    case ExprOp::Eq: return "==";
    case ExprOp::Ne: return "!=";
    case ExprOp::Lt: return "<";
    case ExprOp::Le: return "<=";
    case ExprOp::Gt: return ">";
    case ExprOp::Ge: return ">=";
    case ExprOp::BitAnd: return "&";
    case ExprOp::BitOr: return "|";
    case ExprOp::BitXor: return "^";
    case ExprOp::Shl: return "<<";
    case ExprOp::Shr: return ">>";
    case ExprOp::Dot4U8S8: return "dot4_u8s8";
    case ExprOp::Dot4S8S8: return "dot4_s8s8";
  }
  return "?";
}

bool is_unary(ExprOp op) { return op >= ExprOp::Neg && op <= ExprOp::BitNot; }
bool is_binary(ExprOp op) { return op >= ExprOp::Add; }
bool is_comparison(ExprOp op) { return op >= ExprOp::Eq && op <= ExprOp::Ge; }

namespace {
Expr make(ExprOp op, DType t, std::vector<Expr> args = {}) {
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  n->dtype = t;
  n->args = std::move(args);
  return n;
}

void check(bool ok, const std::string& msg) {
  if (!ok) throw Error("tensor expression: " + msg);
}
}  // namespace

Expr int_imm(int64_t v, DType t) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::IntImm;
  n->dtype = t;
  n->int_value = v;
  return n;
}

Expr float_imm(double v, DType t) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::FloatImm;
  n->dtype = t;
  n->float_value = v;
  return n;
}

Expr const_of(DType t, double v) { return is_float(t) ? float_imm(v, t) : int_imm(static_cast<int64_t>(v), t); }

Expr var(const std::string& name, DType t) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Var;
  n->dtype = t;
  n->name = name;
  return n;
}

Expr load(const std::shared_ptr<const TensorNode>& t, std::vector<Expr> indices) {
  check(t != nullptr, "load from a null tensor");
  check(indices.size() == t->shape.size(), fmt::format("load from '{}' of rank {} with {} indices", t->name,
                                                       t->shape.size(), indices.size()));
  for (const Expr& i : indices) check(i && i->dtype == DType::Int64, "load index must be int64");
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Load;
  n->dtype = t->dtype;
  n->tensor = t;
  n->args = std::move(indices);
  return n;
}

Expr cast(DType t, const Expr& e) {
  if (e->dtype == t) return e;
  return make(ExprOp::Cast, t, {e});
}

Expr reinterpret(DType t, const Expr& e) {
  if (e->dtype == t) return e;
  auto word = [](DType d) { return d == DType::Float32 || d == DType::Int32 || d == DType::UInt32 || d == DType::Float64 ||
                                   d == DType::Int64 || d == DType::UInt64; };
  check(word(t) && word(e->dtype) && dtype_size(t) == dtype_size(e->dtype),
        "reinterpret needs two 32- or 64-bit dtypes of one width, got " + dtype_name(e->dtype) + " as " + dtype_name(t));
  return make(ExprOp::Reinterpret, t, {e});
}

Expr select(const Expr& cond, const Expr& a, const Expr& b) {
  check(cond->dtype == DType::Bool, "select condition must be bool");
  check(a->dtype == b->dtype, "select branches differ: " + dtype_name(a->dtype) + " vs " + dtype_name(b->dtype));
  return make(ExprOp::Select, a->dtype, {cond, a, b});
}

Expr unary(ExprOp op, const Expr& a) {
  check(is_unary(op), std::string("not a unary op: ") + expr_op_name(op));
  DType t = (op == ExprOp::IsNaN || op == ExprOp::IsInf) ? DType::Bool : a->dtype;
  return make(op, t, {a});
}

Expr binary(ExprOp op, const Expr& a, const Expr& b) {
  check(is_binary(op), std::string("not a binary op: ") + expr_op_name(op));
  check(a->dtype == b->dtype, std::string("operands of ") + expr_op_name(op) + " differ: " + dtype_name(a->dtype) +
                                  " vs " + dtype_name(b->dtype));
  DType t = is_comparison(op) ? DType::Bool : a->dtype;
  return make(op, t, {a, b});
}

bool same_expr(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (!a || !b || a->op != b->op || a->dtype != b->dtype || a->args.size() != b->args.size()) return false;
  switch (a->op) {
    case ExprOp::IntImm: return a->int_value == b->int_value;
    case ExprOp::FloatImm: return a->float_value == b->float_value;
    case ExprOp::Var: return false;  // different nodes
    case ExprOp::Load:
      if (a->tensor != b->tensor) return false;
      break;
    default: break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!same_expr(a->args[i], b->args[i])) return false;
  return true;
}

Expr operator+(const Expr& a, const Expr& b) { return binary(ExprOp::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return binary(ExprOp::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return binary(ExprOp::Mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return binary(ExprOp::Div, a, b); }
Expr operator-(const Expr& a) { return unary(ExprOp::Neg, a); }
Expr operator<(const Expr& a, const Expr& b) { return binary(ExprOp::Lt, a, b); }
Expr operator<=(const Expr& a, const Expr& b) { return binary(ExprOp::Le, a, b); }
Expr operator>(const Expr& a, const Expr& b) { return binary(ExprOp::Gt, a, b); }
Expr operator>=(const Expr& a, const Expr& b) { return binary(ExprOp::Ge, a, b); }
Expr operator&&(const Expr& a, const Expr& b) { return binary(ExprOp::And, a, b); }
Expr operator||(const Expr& a, const Expr& b) { return binary(ExprOp::Or, a, b); }
Expr eq(const Expr& a, const Expr& b) { return binary(ExprOp::Eq, a, b); }
Expr min(const Expr& a, const Expr& b) { return binary(ExprOp::Min, a, b); }
Expr max(const Expr& a, const Expr& b) { return binary(ExprOp::Max, a, b); }
Expr floordiv(const Expr& a, const Expr& b) { return binary(ExprOp::FloorDiv, a, b); }
Expr floormod(const Expr& a, const Expr& b) { return binary(ExprOp::FloorMod, a, b); }
Expr dot4_u8s8(const Expr& a, const Expr& b) {
  check(a->dtype == DType::Int32, "dot4_u8s8 reads int32 operands, not " + dtype_name(a->dtype));
  return binary(ExprOp::Dot4U8S8, a, b);
}
Expr dot4_s8s8(const Expr& a, const Expr& b) {
  check(a->dtype == DType::Int32, "dot4_s8s8 reads int32 operands, not " + dtype_name(a->dtype));
  return binary(ExprOp::Dot4S8S8, a, b);
}
Expr byte_quad(const std::function<Expr(int64_t)>& byte) {
  Expr quad = byte(0);
  for (int64_t j = 1; j < 4; ++j) quad = binary(ExprOp::BitOr, quad, binary(ExprOp::Shl, byte(j), int_imm(8 * j, DType::Int32)));
  return quad;
}
int32_t byte_quad_bits(const std::function<int64_t(int64_t)>& byte) {
  uint32_t bits = 0;
  for (int64_t j = 0; j < 4; ++j) bits |= (static_cast<uint32_t>(byte(j)) & 0xffu) << (8 * j);
  return static_cast<int32_t>(bits);
}
Expr operator+(const Expr& a, int64_t b) { return b == 0 ? a : a + int_imm(b); }
Expr operator*(const Expr& a, int64_t b) { return b == 1 ? a : a * int_imm(b); }
Expr operator-(const Expr& a, int64_t b) { return b == 0 ? a : a - int_imm(b); }

std::string print_expr(const Expr& e) {
  switch (e->op) {
    case ExprOp::IntImm: return e->dtype == DType::Int64 ? std::to_string(e->int_value)
                                                         : fmt::format("{}({})", dtype_name(e->dtype), e->int_value);
    case ExprOp::FloatImm: return fmt::format("{}({:.17g})", dtype_name(e->dtype), e->float_value);
    case ExprOp::Var: return e->name;
    case ExprOp::Load: {
      std::string s = e->tensor->name + "[";
      for (size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + print_expr(e->args[i]);
      return s + "]";
    }
    case ExprOp::Cast: return dtype_name(e->dtype) + "(" + print_expr(e->args[0]) + ")";
    case ExprOp::Reinterpret: return "bits_as_" + dtype_name(e->dtype) + "(" + print_expr(e->args[0]) + ")";
    case ExprOp::Select:
      return "select(" + print_expr(e->args[0]) + ", " + print_expr(e->args[1]) + ", " + print_expr(e->args[2]) + ")";
    default: break;
  }
  if (is_unary(e->op)) return std::string(expr_op_name(e->op)) + "(" + print_expr(e->args[0]) + ")";
  const std::string name = expr_op_name(e->op);
  bool infix = !std::isalpha(static_cast<unsigned char>(name[0]));
  if (infix) return "(" + print_expr(e->args[0]) + " " + name + " " + print_expr(e->args[1]) + ")";
  return name + "(" + print_expr(e->args[0]) + ", " + print_expr(e->args[1]) + ")";
}

}  // namespace kiln::te
