#include "backends/llvm/expr_ops.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <string>

#include "backends/llvm/math_polynomials.h"
#include "frontend/ir/error.h"

namespace kiln::llvm_backend {

using te::ExprOp;

llvm::Type* memory_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::Float32: return llvm::Type::getFloatTy(ctx);
    case DType::Float64: return llvm::Type::getDoubleTy(ctx);
    case DType::Float16: return llvm::Type::getHalfTy(ctx);
    case DType::BFloat16: return llvm::Type::getBFloatTy(ctx);
    case DType::Bool: return llvm::Type::getInt8Ty(ctx);
    default: return llvm::Type::getIntNTy(ctx, static_cast<unsigned>(8 * dtype_size(t)));
  }
}

llvm::Type* value_type(llvm::LLVMContext& ctx, DType t) {
  if (t == DType::Float16 || t == DType::BFloat16) return llvm::Type::getFloatTy(ctx);
  if (t == DType::Bool) return llvm::Type::getInt1Ty(ctx);
  return memory_type(ctx, t);
}

namespace {

// `scalar`, as a vector of as many lanes when `like` is a vector.
llvm::Type* lanes_like(llvm::Value* like, llvm::Type* scalar) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like->getType())) return llvm::VectorType::get(scalar, vt->getElementCount());
  return scalar;
}

}  // namespace

llvm::Type* value_type_like(llvm::Value* like, DType t) { return lanes_like(like, value_type(like->getContext(), t)); }

// float -> bfloat16 with round-to-nearest-even on the bits: LLVM lowers fptrunc to bfloat to a
// libgcc call that older toolchains lack, and packages must not need a runtime library.
llvm::Value* emit_float_to_bfloat(llvm::IRBuilder<>& b, llvm::Value* v) {
  llvm::Type* i32 = lanes_like(v, b.getInt32Ty());
  llvm::Type* i16 = lanes_like(v, b.getInt16Ty());
  llvm::Type* bf = lanes_like(v, b.getBFloatTy());
  llvm::Value* bits = b.CreateBitCast(v, i32);
  llvm::Value* lsb = b.CreateAnd(b.CreateLShr(bits, llvm::ConstantInt::get(i32, 16)), llvm::ConstantInt::get(i32, 1));
  llvm::Value* rounded = b.CreateAdd(bits, b.CreateAdd(lsb, llvm::ConstantInt::get(i32, 0x7fff)));
  llvm::Value* nan = b.CreateOr(bits, llvm::ConstantInt::get(i32, 0x400000));  // keep NaN quiet
  llvm::Value* pick = b.CreateSelect(b.CreateFCmpUNO(v, v), nan, rounded);
  return b.CreateBitCast(b.CreateTrunc(b.CreateLShr(pick, llvm::ConstantInt::get(i32, 16)), i16), bf);
}

llvm::Value* emit_bfloat_to_float(llvm::IRBuilder<>& b, llvm::Value* v) {
  llvm::Type* i32 = lanes_like(v, b.getInt32Ty());
  llvm::Value* bits = b.CreateZExt(b.CreateBitCast(v, lanes_like(v, b.getInt16Ty())), i32);
  return b.CreateBitCast(b.CreateShl(bits, llvm::ConstantInt::get(i32, 16)), lanes_like(v, b.getFloatTy()));
}

llvm::Value* emit_widen(llvm::IRBuilder<>& b, llvm::Value* v) {
  if (v->getType()->getScalarType()->isBFloatTy()) return emit_bfloat_to_float(b, v);
  return b.CreateFPExt(v, lanes_like(v, b.getFloatTy()));
}

namespace {

// The low bits (the width of `target`, at most 32) of the float `v` converted to int64 with
// saturation (NaN -> 0), as ONNX converts. When every lane is below 2^31 in magnitude (a quantized
// value always is) that is one conversion to int32, vcvttps2dq for 16 lanes; only otherwise does
// it branch to llvm.fptosi.sat to int64, which x86 scalarizes lane by lane (a vcvttss2si, two
// compares and two cmovs each) and 32-bit cores make a library call. Always taking that path made
// the float32 requantization of every int8 conv cost more than the conv.
llvm::Value* emit_float_to_narrow_int(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Type* target) {
  llvm::Type* ft = v->getType();
  llvm::Type* i32 = b.getInt32Ty();
  llvm::Type* i64 = b.getInt64Ty();
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(ft)) {
    i32 = llvm::VectorType::get(i32, vt->getElementCount());
    i64 = llvm::VectorType::get(i64, vt->getElementCount());
  }
  llvm::Value* small = b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v), llvm::ConstantFP::get(ft, 2147483648.0));
  if (ft->isVectorTy()) small = b.CreateAndReduce(small);
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  auto* fast = llvm::BasicBlock::Create(ctx, "cvt.small", fn);
  auto* slow = llvm::BasicBlock::Create(ctx, "cvt.large", fn);
  auto* join = llvm::BasicBlock::Create(ctx, "cvt.done", fn);
  b.CreateCondBr(small, fast, slow);
  b.SetInsertPoint(fast);
  llvm::Value* direct = b.CreateFPToSI(v, i32);
  b.CreateBr(join);
  b.SetInsertPoint(slow);
  llvm::Value* low = b.CreateTrunc(b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, ft}, {v}), i32);
  b.CreateBr(join);
  b.SetInsertPoint(join);
  llvm::PHINode* r = b.CreatePHI(i32, 2);
  r->addIncoming(direct, fast);
  r->addIncoming(low, slow);
  return target->getScalarSizeInBits() < 32 ? b.CreateTrunc(r, target) : static_cast<llvm::Value*>(r);
}

}  // namespace

llvm::Value* emit_cast(llvm::IRBuilder<>& b, llvm::Value* v, DType from, DType to) {
  llvm::Type* target = value_type_like(v, to);
  if (to == DType::Bool) {
    if (is_float(from)) return b.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
    return b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (is_float(to)) {
    llvm::Value* r;
    if (is_float(from)) r = b.CreateFPCast(v, target);
    else if (from == DType::Bool || !is_signed(from)) r = b.CreateUIToFP(v, target);
    else r = b.CreateSIToFP(v, target);
    if (to == DType::Float16 || to == DType::BFloat16) {  // round through the narrow type
      if (to == DType::BFloat16) {
        r = emit_bfloat_to_float(b, emit_float_to_bfloat(b, r));
      } else {
        llvm::Type* narrow = b.getHalfTy();
        if (auto* vt = llvm::dyn_cast<llvm::VectorType>(target)) narrow = llvm::VectorType::get(narrow, vt->getElementCount());
        r = b.CreateFPExt(b.CreateFPTrunc(r, narrow), target);
      }
    }
    return r;
  }
  if (is_float(from)) {
    // ONNX (and the reference) convert through int64, saturating, and wrap to the target's width.
    if (dtype_size(to) <= 4) return emit_float_to_narrow_int(b, v, target);
    llvm::Type* i64 = value_type_like(v, DType::Int64);
    return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, v->getType()}, {v});
  }
  bool src_signed = from != DType::Bool && is_signed(from);
  return b.CreateIntCast(v, target, src_signed);
}


llvm::Value* emit_unary_op(llvm::IRBuilder<>& b, ExprOp op, DType t, llvm::Value* x) {
  auto intrinsic1 = [&](llvm::Intrinsic::ID id, llvm::Value* v) { return b.CreateUnaryIntrinsic(id, v); };
  bool f = is_float(t);
  llvm::Type* ty = x->getType();
  auto libm_of = [&](const char* name, llvm::Value* arg) -> llvm::Value* {
    // float64 transcendental functions still call libm (float32 ones are inline: math_polynomials.h).
    llvm::Type* st = ty->getScalarType();
    std::string fname = std::string(name) + (st->isFloatTy() ? "f" : "");
    llvm::Module* m = b.GetInsertBlock()->getModule();
    llvm::FunctionCallee callee = m->getOrInsertFunction(fname, llvm::FunctionType::get(st, {st}, false));
    if (!ty->isVectorTy()) return b.CreateCall(callee, {arg});
    llvm::Value* out = llvm::PoisonValue::get(ty);
    for (unsigned l = 0; l < llvm::cast<llvm::FixedVectorType>(ty)->getNumElements(); ++l)
      out = b.CreateInsertElement(out, b.CreateCall(callee, {b.CreateExtractElement(arg, static_cast<uint64_t>(l))}),
                                   static_cast<uint64_t>(l));
    return out;
  };
  auto libm = [&](const char* name) { return libm_of(name, x); };
  bool single = ty->getScalarType()->isFloatTy();
  switch (op) {
    case ExprOp::Neg: return f ? b.CreateFNeg(x) : b.CreateNeg(x);
    case ExprOp::Not: return b.CreateNot(x);
    case ExprOp::BitNot: return b.CreateNot(x);
    case ExprOp::Abs:
      if (f) return intrinsic1(llvm::Intrinsic::fabs, x);
      if (!is_signed(t)) return x;
      return b.CreateSelect(b.CreateICmpSLT(x, llvm::Constant::getNullValue(ty)), b.CreateNeg(x), x);
    case ExprOp::Sqrt: return intrinsic1(llvm::Intrinsic::sqrt, x);
    case ExprOp::Floor: return intrinsic1(llvm::Intrinsic::floor, x);
    case ExprOp::Ceil: return intrinsic1(llvm::Intrinsic::ceil, x);
    case ExprOp::Round: return intrinsic1(llvm::Intrinsic::roundeven, x);
    case ExprOp::IsNaN: return b.CreateFCmpUNO(x, x);
    case ExprOp::IsInf:
      return b.CreateFCmpOEQ(intrinsic1(llvm::Intrinsic::fabs, x), llvm::ConstantFP::getInfinity(ty));
    case ExprOp::Exp: return single ? emit_exp(b, x) : libm("exp");
    case ExprOp::Log: return single ? emit_log(b, x) : libm("log");
    case ExprOp::Erf: return single ? emit_erf(b, x) : libm("erf");
    case ExprOp::Tanh: return single ? emit_tanh(b, x) : libm("tanh");
    case ExprOp::Sigmoid:
      if (single) return emit_sigmoid(b, x);
      return b.CreateFDiv(llvm::ConstantFP::get(ty, 1.0),
                           b.CreateFAdd(llvm::ConstantFP::get(ty, 1.0), libm_of("exp", b.CreateFNeg(x))));
    case ExprOp::Sin: return single ? emit_sin(b, x) : libm("sin");
    case ExprOp::Cos: return single ? emit_cos(b, x) : libm("cos");
    case ExprOp::Tan: return single ? emit_tan(b, x) : libm("tan");
    case ExprOp::Asin: return single ? emit_asin(b, x) : libm("asin");
    case ExprOp::Acos: return single ? emit_acos(b, x) : libm("acos");
    case ExprOp::Atan: return single ? emit_atan(b, x) : libm("atan");
    case ExprOp::Sinh: return single ? emit_sinh(b, x) : libm("sinh");
    case ExprOp::Cosh: return single ? emit_cosh(b, x) : libm("cosh");
    case ExprOp::Asinh: return single ? emit_asinh(b, x) : libm("asinh");
    case ExprOp::Acosh: return single ? emit_acosh(b, x) : libm("acosh");
    case ExprOp::Atanh: return single ? emit_atanh(b, x) : libm("atanh");
    default: break;
  }
  throw Error(std::string("codegen: unary ") + te::expr_op_name(op));
}

// Min and Max of floats: `y_wins ? y : x`, then y where y is NaN, so a NaN in either operand is the
// result (as numpy's minimum and maximum; the sign of a zero result is not specified). llvm.minimum /
// llvm.maximum also order -0 below +0, which x86 before AVX10.2 pays for with a sign test and two
// blends on the chain through x; a max-pool's or a reduction's accumulator is x, so that chain set
// the loop's speed (a 13x13 pool ran at a sixth of its load rate). Here the chain through x is one
// compare-select that x86 emits as maxps / minps, and y's NaN test is off it.
namespace {
llvm::Value* emit_nan_propagating_select(llvm::IRBuilder<>& b, llvm::Value* y_wins, llvm::Value* x, llvm::Value* y) {
  // The freeze keeps InstCombine from merging the two selects into one on an or of both compares,
  // which x86 cannot emit as maxps / minps.
  llvm::Value* picked = b.CreateFreeze(b.CreateSelect(y_wins, y, x));
  return b.CreateSelect(b.CreateFCmpUNO(y, y), y, picked);
}
}  // namespace

llvm::Value* emit_binary_op(llvm::IRBuilder<>& b, ExprOp op, DType t, llvm::Value* x, llvm::Value* y) {
  auto intrinsic1 = [&](llvm::Intrinsic::ID id, llvm::Value* v) { return b.CreateUnaryIntrinsic(id, v); };
  llvm::Type* ty = x->getType();
  // float32 uses inline code (math_polynomials.h); float64 still lowers to libm fmod / pow.
  const bool single = ty->getScalarType()->isFloatTy();
  if (is_float(t)) {
    switch (op) {
      case ExprOp::Add: return b.CreateFAdd(x, y);
      case ExprOp::Sub: return b.CreateFSub(x, y);
      case ExprOp::Mul: return b.CreateFMul(x, y);
      case ExprOp::Div: return b.CreateFDiv(x, y);
      case ExprOp::Mod:
      case ExprOp::FMod: return single ? emit_fmod(b, x, y) : b.CreateFRem(x, y);
      case ExprOp::FloorDiv: return intrinsic1(llvm::Intrinsic::floor, b.CreateFDiv(x, y));
      case ExprOp::FloorMod: {
        llvm::Value* r = single ? emit_fmod(b, x, y) : b.CreateFRem(x, y);
        llvm::Value* zero = llvm::Constant::getNullValue(ty);
        llvm::Value* fix = b.CreateAnd(b.CreateFCmpONE(r, zero),
                                        b.CreateXor(b.CreateFCmpOLT(r, zero), b.CreateFCmpOLT(y, zero)));
        return b.CreateSelect(fix, b.CreateFAdd(r, y), r);
      }
      case ExprOp::Min: return emit_nan_propagating_select(b, b.CreateFCmpOLT(y, x), x, y);
      case ExprOp::Max: return emit_nan_propagating_select(b, b.CreateFCmpOGT(y, x), x, y);
      case ExprOp::Pow: return single ? emit_pow(b, x, y) : b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y);
      case ExprOp::Eq: return b.CreateFCmpOEQ(x, y);
      case ExprOp::Ne: return b.CreateFCmpUNE(x, y);
      case ExprOp::Lt: return b.CreateFCmpOLT(x, y);
      case ExprOp::Le: return b.CreateFCmpOLE(x, y);
      case ExprOp::Gt: return b.CreateFCmpOGT(x, y);
      case ExprOp::Ge: return b.CreateFCmpOGE(x, y);
      default: break;
    }
    throw Error(std::string("codegen: float ") + te::expr_op_name(op));
  }
  const bool s = t != DType::Bool && is_signed(t);
  llvm::Value* zero = llvm::Constant::getNullValue(ty);
  llvm::Value* one = llvm::ConstantInt::get(ty, 1);
  switch (op) {
    case ExprOp::Add: return b.CreateAdd(x, y);
    case ExprOp::Sub: return b.CreateSub(x, y);
    case ExprOp::Mul: return b.CreateMul(x, y);
    case ExprOp::Div:
    case ExprOp::Mod:
    case ExprOp::FloorDiv:
    case ExprOp::FloorMod: {
      // Division by zero and INT_MIN / -1 are undefined in LLVM: divide by 1 instead (the result for
      // a zero divisor is unspecified by ONNX; the reference rejects it).
      llvm::Value* bad = b.CreateICmpEQ(y, zero);
      if (s) bad = b.CreateOr(bad, b.CreateICmpEQ(y, llvm::Constant::getAllOnesValue(ty)));
      llvm::Value* d = b.CreateSelect(bad, one, y);
      llvm::Value* q = s ? b.CreateSDiv(x, d) : b.CreateUDiv(x, d);
      llvm::Value* r = s ? b.CreateSRem(x, d) : b.CreateURem(x, d);
      if (s) {  // y == -1: q = -x, r = 0
        llvm::Value* m1 = b.CreateICmpEQ(y, llvm::Constant::getAllOnesValue(ty));
        q = b.CreateSelect(m1, b.CreateNeg(x), q);
        r = b.CreateSelect(m1, zero, r);
      }
      if (op == ExprOp::Div) return q;
      if (op == ExprOp::Mod) return r;
      if (!s) return op == ExprOp::FloorDiv ? q : r;
      llvm::Value* fix = b.CreateAnd(b.CreateICmpNE(r, zero),
                                      b.CreateXor(b.CreateICmpSLT(r, zero), b.CreateICmpSLT(y, zero)));
      if (op == ExprOp::FloorDiv) return b.CreateSelect(fix, b.CreateSub(q, one), q);
      return b.CreateSelect(fix, b.CreateAdd(r, y), r);
    }
    case ExprOp::Min: return b.CreateSelect(s ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y), x, y);
    case ExprOp::Max: return b.CreateSelect(s ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y), x, y);
    case ExprOp::And: return b.CreateAnd(x, y);
    case ExprOp::Or: return b.CreateOr(x, y);
    case ExprOp::Xor: return b.CreateXor(x, y);
    case ExprOp::BitAnd: return b.CreateAnd(x, y);
    case ExprOp::BitOr: return b.CreateOr(x, y);
    case ExprOp::BitXor: return b.CreateXor(x, y);
    case ExprOp::Shl:
    case ExprOp::Shr: {
      unsigned bits = ty->getScalarSizeInBits();
      llvm::Value* big = b.CreateICmpUGE(y, llvm::ConstantInt::get(ty, bits));
      llvm::Value* amount = b.CreateSelect(big, zero, y);
      llvm::Value* r = op == ExprOp::Shl ? b.CreateShl(x, amount) : b.CreateLShr(x, amount);
      return b.CreateSelect(big, zero, r);
    }
    case ExprOp::Dot4U8S8:
    case ExprOp::Dot4S8S8: {
      // Byte j of x zero-extended (Dot4S8S8: sign-extended) times byte j of y sign-extended, summed;
      // LLVM 19 does not form vpdpbusd, sdot or SMLAD from this itself (codegen.cc emits vpdpbusd
      // and sdot where the target has them).
      const bool x_signed = op == ExprOp::Dot4S8S8;
      if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(ty)) {
        // Vectors as bytes, widened, multiplied, and summed pairwise twice: the shape x86's
        // instruction selection turns into vpmaddwd (two multiply-adds a lane) and a vphaddd.
        const unsigned n = vt->getNumElements();
        auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), 4 * n);
        auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), 4 * n);
        llvm::Value* xw = x_signed ? b.CreateSExt(b.CreateBitCast(x, bytes), wide) : b.CreateZExt(b.CreateBitCast(x, bytes), wide);
        llvm::Value* p = b.CreateMul(xw, b.CreateSExt(b.CreateBitCast(y, bytes), wide));
        for (unsigned width = 4 * n; width > n; width /= 2) {
          std::vector<int> even, odd;
          for (unsigned i = 0; i < width / 2; ++i) {
            even.push_back(static_cast<int>(2 * i));
            odd.push_back(static_cast<int>(2 * i + 1));
          }
          p = b.CreateAdd(b.CreateShuffleVector(p, even), b.CreateShuffleVector(p, odd));
        }
        return p;
      }
      llvm::Value* sum = zero;
      for (unsigned j = 0; j < 4; ++j) {
        llvm::Value* xb = x_signed ? b.CreateAShr(b.CreateShl(x, llvm::ConstantInt::get(ty, 24 - 8 * j)), llvm::ConstantInt::get(ty, 24))
                                   : b.CreateAnd(b.CreateLShr(x, llvm::ConstantInt::get(ty, 8 * j)), llvm::ConstantInt::get(ty, 255));
        llvm::Value* yb = b.CreateAShr(b.CreateShl(y, llvm::ConstantInt::get(ty, 24 - 8 * j)), llvm::ConstantInt::get(ty, 24));
        sum = b.CreateAdd(sum, b.CreateMul(xb, yb));
      }
      return sum;
    }
    case ExprOp::Eq: return b.CreateICmpEQ(x, y);
    case ExprOp::Ne: return b.CreateICmpNE(x, y);
    case ExprOp::Lt: return s ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
    case ExprOp::Le: return s ? b.CreateICmpSLE(x, y) : b.CreateICmpULE(x, y);
    case ExprOp::Gt: return s ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y);
    case ExprOp::Ge: return s ? b.CreateICmpSGE(x, y) : b.CreateICmpUGE(x, y);
    case ExprOp::Pow: {
      // Square-and-multiply over every exponent bit, branch-free so it vectorizes; a negative
      // exponent gives 1 / base^-e truncated: 1 for base 1, +-1 for base -1, else 0.
      unsigned bits = ty->getScalarSizeInBits();
      llvm::Value* result = one;
      llvm::Value* base = x;
      for (unsigned k = 0; k < bits; ++k) {
        llvm::Value* bit = b.CreateAnd(b.CreateLShr(y, llvm::ConstantInt::get(ty, k)), one);
        result = b.CreateSelect(b.CreateICmpNE(bit, zero), b.CreateMul(result, base), result);
        base = b.CreateMul(base, base);
      }
      if (!s) return result;
      llvm::Value* minus_one = llvm::Constant::getAllOnesValue(ty);
      llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(y, one), zero);
      llvm::Value* negative = b.CreateSelect(b.CreateICmpEQ(x, one), one,
                                              b.CreateSelect(b.CreateICmpEQ(x, minus_one),
                                                              b.CreateSelect(odd, minus_one, one), zero));
      return b.CreateSelect(b.CreateICmpSLT(y, zero), negative, result);
    }
    default: break;
  }
  throw Error(std::string("codegen: integer ") + te::expr_op_name(op));
}

}  // namespace kiln::llvm_backend
