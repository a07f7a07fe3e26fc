#include "backends/llvm/requantize.h"

#include <cmath>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsARM.h>

namespace kiln::llvm_backend {

namespace {

using te::ExprNode;
using te::ExprOp;

// An integer dtype of one or two bytes: its values and any two's sum are exact in float32.
bool is_short_integer(DType t) { return is_integer(t) && (dtype_size(t) == 1 || dtype_size(t) == 2); }

// The integer a float32 constant holds, when it holds one in [lo, hi].
std::optional<int64_t> integer_constant(const ExprNode& e, int64_t lo, int64_t hi) {
  if (e.op != ExprOp::FloatImm || e.dtype != DType::Float32) return std::nullopt;
  const double v = e.float_value;
  if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || std::floor(v) != v) return std::nullopt;
  return static_cast<int64_t>(v);
}

// `e` as op(x, constant) or op(constant, x): x and the constant's node.
std::optional<std::pair<const ExprNode*, const ExprNode*>> with_constant(const ExprNode& e, ExprOp op) {
  if (e.op != op || e.dtype != DType::Float32) return std::nullopt;
  if (e.args[1]->op == ExprOp::FloatImm) return std::make_pair(e.args[0].get(), e.args[1].get());
  if (e.args[0]->op == ExprOp::FloatImm) return std::make_pair(e.args[1].get(), e.args[0].get());
  return std::nullopt;
}

}  // namespace

std::optional<RequantizeForm> match_requantize(const ExprNode& cast) {
  if (cast.op != ExprOp::Cast || !is_short_integer(cast.dtype) || cast.args[0]->dtype != DType::Float32) return std::nullopt;
  const int bits = static_cast<int>(8 * dtype_size(cast.dtype));
  const int64_t type_lo = is_signed(cast.dtype) ? -(int64_t{1} << (bits - 1)) : 0;
  const int64_t type_hi = is_signed(cast.dtype) ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
  // min(max(v, lo), hi) or max(min(v, hi), lo).
  const ExprNode& clamp = *cast.args[0];
  auto outer = with_constant(clamp, ExprOp::Min);
  auto inner_op = ExprOp::Max;
  if (!outer) {
    outer = with_constant(clamp, ExprOp::Max);
    inner_op = ExprOp::Min;
  }
  if (!outer) return std::nullopt;
  auto inner = with_constant(*outer->first, inner_op);
  if (!inner) return std::nullopt;
  const ExprNode* lo_node = inner_op == ExprOp::Max ? inner->second : outer->second;
  const ExprNode* hi_node = inner_op == ExprOp::Max ? outer->second : inner->second;
  const std::optional<int64_t> lo = integer_constant(*lo_node, type_lo, type_hi), hi = integer_constant(*hi_node, type_lo, type_hi);
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  // round(y), or round(y) + cast(float32, z) in either order.
  const ExprNode* v = inner->first;
  RequantizeForm form{nullptr, nullptr, *lo, *hi};
  auto is_round = [](const ExprNode* x) { return x->op == ExprOp::Round && x->dtype == DType::Float32; };
  auto is_zero_point = [](const ExprNode* x) { return x->op == ExprOp::Cast && is_short_integer(x->args[0]->dtype); };
  if (is_round(v)) {
    form.scaled = v->args[0];
    return form;
  }
  if (v->op != ExprOp::Add) return std::nullopt;
  for (size_t side : {0u, 1u}) {
    const ExprNode *r = v->args[side].get(), *z = v->args[1 - side].get();
    if (is_round(r) && is_zero_point(z)) {
      form.scaled = r->args[0];
      form.zero_point = z->args[0];
      return form;
    }
  }
  return std::nullopt;
}

llvm::Value* emit_requantize_vcvtr(llvm::IRBuilder<>& b, const RequantizeForm& form, llvm::Value* scaled,
                                   llvm::Value* zero_point) {
  // VCVTR's result is an integer in a float register: llvm.arm.vcvtr gives its bits as a float.
  auto vcvtr = [&](llvm::Value* x) {
    return b.CreateBitCast(b.CreateIntrinsic(llvm::Intrinsic::arm_vcvtr, {x->getType()}, {x}), b.getInt32Ty());
  };
  llvm::Type* i32 = b.getInt32Ty();
  llvm::Value* rounded = nullptr;
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(scaled->getType())) {
    // A vector (an int8 store's lanes: a 32-bit vector holds four) is lanes to the core: one each.
    i32 = llvm::FixedVectorType::get(i32, vt->getNumElements());
    rounded = llvm::PoisonValue::get(i32);
    for (unsigned l = 0; l < vt->getNumElements(); ++l) rounded = b.CreateInsertElement(rounded, vcvtr(b.CreateExtractElement(scaled, l)), l);
  } else {
    rounded = vcvtr(scaled);
  }
  llvm::Value* v = zero_point ? b.CreateBinaryIntrinsic(llvm::Intrinsic::sadd_sat, rounded, zero_point) : rounded;
  v = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, llvm::ConstantInt::get(i32, static_cast<uint64_t>(form.lo), true));
  v = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, llvm::ConstantInt::get(i32, static_cast<uint64_t>(form.hi), true));
  return b.CreateSelect(b.CreateFCmpUNO(scaled, scaled), llvm::Constant::getNullValue(i32), v);
}

}  // namespace kiln::llvm_backend
