/// \file Scalar expressions of tensor expressions: the language every op's computation is written in.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/ir/dtype.h"

namespace kiln::te {

struct TensorNode;

/// Expression node kinds. Arithmetic follows C on the operand dtype: integers wrap, Div truncates,
/// Mod takes the dividend's sign; FloorDiv/FloorMod round toward negative infinity (index arithmetic).
enum class ExprOp {
  IntImm, FloatImm, Var, Load, Cast, Reinterpret, Select,
  // unary
  Neg, Not, Abs, Exp, Log, Sqrt, Tanh, Erf, Sigmoid, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh,
  Atanh, Floor, Ceil, Round, IsNaN, IsInf, BitNot,
  // binary
  Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Min, Max, Pow, FMod, And, Or, Xor, Eq, Ne, Lt, Le, Gt, Ge,
  BitAnd, BitOr, BitXor, Shl, Shr,
  // int32 x int32 -> int32: the four bytes of a, unsigned, times the four bytes of b, signed, summed
  // (what x86's vpdpbusd computes per lane). An int8 convolution or matmul whose reduction runs four
  // channels at a time (frontend/layout/int8_dot_layout.h) is a sum of these.
  Dot4U8S8,
  // The same with a's bytes signed too (what AArch64's sdot computes per lane).
  Dot4S8S8,
};
const char* expr_op_name(ExprOp op);
bool is_unary(ExprOp op);
bool is_binary(ExprOp op);
bool is_comparison(ExprOp op);

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

/// One immutable node. Integer index arithmetic uses Int64; comparisons and logic produce Bool.
struct ExprNode {
  ExprOp op;
  DType dtype;
  int64_t int_value = 0;     // IntImm
  double float_value = 0.0;  // FloatImm
  std::string name;          // Var
  std::shared_ptr<const TensorNode> tensor;  // Load: the tensor read; args are the indices
  std::vector<Expr> args;
};

Expr int_imm(int64_t v, DType t = DType::Int64);
Expr float_imm(double v, DType t = DType::Float32);
/// A constant of any dtype: float dtypes get FloatImm, the others IntImm.
Expr const_of(DType t, double v);
Expr var(const std::string& name, DType t = DType::Int64);  // a loop variable (Int64) or a named value
Expr load(const std::shared_ptr<const TensorNode>& t, std::vector<Expr> indices);
Expr cast(DType t, const Expr& e);
/// The same bits read as another dtype of the same width: float32 <-> (u)int32, float64 <-> (u)int64.
Expr reinterpret(DType t, const Expr& e);
Expr select(const Expr& cond, const Expr& a, const Expr& b);
Expr unary(ExprOp op, const Expr& a);
/// Both operands must have the same dtype (scalar immediates are not promoted implicitly).
Expr binary(ExprOp op, const Expr& a, const Expr& b);

/// Whether a and b compute the same thing node for node: the same ops, immediates, tensors and
/// variables (a variable is its node: two variables of one name are different variables).
bool same_expr(const Expr& a, const Expr& b);

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator<(const Expr& a, const Expr& b);
Expr operator<=(const Expr& a, const Expr& b);
Expr operator>(const Expr& a, const Expr& b);
Expr operator>=(const Expr& a, const Expr& b);
Expr operator&&(const Expr& a, const Expr& b);
Expr operator||(const Expr& a, const Expr& b);
Expr eq(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr floordiv(const Expr& a, const Expr& b);
Expr floormod(const Expr& a, const Expr& b);
/// ExprOp::Dot4U8S8 of two int32 values (each four packed bytes).
Expr dot4_u8s8(const Expr& a, const Expr& b);
/// ExprOp::Dot4S8S8 of two int32 values.
Expr dot4_s8s8(const Expr& a, const Expr& b);
/// A Dot4 operand built at run time: the int32 whose byte j is byte(j), an int32 in [0, 255].
Expr byte_quad(const std::function<Expr(int64_t j)>& byte);
/// A Dot4 operand packed at compile time: the int32 whose byte j is the low byte of byte(j)
/// (a weight's two's complement byte).
int32_t byte_quad_bits(const std::function<int64_t(int64_t j)>& byte);
/// Index helpers: an Int64 expression plus/times a constant.
Expr operator+(const Expr& a, int64_t b);
Expr operator*(const Expr& a, int64_t b);
Expr operator-(const Expr& a, int64_t b);

/// Prints an expression in a compact infix form; the canonical print is also what task keys hash.
std::string print_expr(const Expr& e);

}  // namespace kiln::te
