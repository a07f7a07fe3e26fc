#include "backends/llvm/math_polynomials.h"

#include <llvm/IR/Intrinsics.h>

#include <cmath>

namespace kiln::llvm_backend {
namespace {

llvm::Value* c(llvm::IRBuilder<>&, llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

llvm::Type* int_type_like(llvm::IRBuilder<>& b, llvm::Type* t) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t)) return llvm::VectorType::get(b.getInt32Ty(), vt->getElementCount());
  return b.getInt32Ty();
}

llvm::Value* ci(llvm::IRBuilder<>& b, llvm::Type* t, int32_t v) {
  return llvm::ConstantInt::get(int_type_like(b, t), static_cast<uint64_t>(static_cast<int64_t>(v)), true);
}

llvm::Value* intrinsic(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, llvm::Value* x) {
  return b.CreateUnaryIntrinsic(id, x);
}

// Horner evaluation of sum coeffs[i] * x^i.
llvm::Value* poly(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<double> coeffs) {
  llvm::Type* t = x->getType();
  std::vector<double> cs(coeffs);
  llvm::Value* acc = c(b, t, cs.back());
  for (size_t i = cs.size() - 1; i-- > 0;) acc = b.CreateFAdd(b.CreateFMul(acc, x), c(b, t, cs[i]));
  return acc;
}

}  // namespace

// exp: x = n*ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact n*ln2), e^r by a degree-6
// polynomial (rel. error < 2e-7), times 2^n built in the exponent bits. Saturates to 0 / inf.
llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, c(b, t, -87.3)), c(b, t, 88.7));
  llvm::Value* n = intrinsic(b, llvm::Intrinsic::roundeven, b.CreateFMul(xc, c(b, t, 1.4426950408889634)));
  llvm::Value* r = b.CreateFSub(xc, b.CreateFMul(n, c(b, t, 0.693145751953125)));
  r = b.CreateFSub(r, b.CreateFMul(n, c(b, t, 1.428606765330187e-06)));
  llvm::Value* p = poly(b, r, {1.0, 1.0, 0.5, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720});
  llvm::Value* ni = b.CreateFPToSI(n, int_type_like(b, t));
  llvm::Value* scale = b.CreateBitCast(b.CreateShl(b.CreateAdd(ni, ci(b, t, 127)), ci(b, t, 23)), t);
  llvm::Value* result = b.CreateFMul(p, scale);
  // Outside the clamp: exact 0 below, inf above; NaN passes through.
  result = b.CreateSelect(b.CreateFCmpOLT(x, c(b, t, -87.3)), c(b, t, 0.0), result);
  result = b.CreateSelect(b.CreateFCmpOGT(x, c(b, t, 88.7)), c(b, t, INFINITY), result);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
}

// log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2*atanh(s), s = (m-1)/(m+1), by its odd
// series to s^9 (rel. error < 1e-7); plus e*ln2. log(0) = -inf, log(<0) = NaN, log(inf) = inf.
llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Type* it = int_type_like(b, t);
  // Scale subnormals up so the exponent trick sees a normal number.
  llvm::Value* tiny = b.CreateFCmpOLT(x, c(b, t, 1.1754943508222875e-38));
  llvm::Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, c(b, t, 8388608.0)), x);
  llvm::Value* bits = b.CreateBitCast(xs, it);
  llvm::Value* e = b.CreateSub(b.CreateLShr(bits, ci(b, t, 23)), ci(b, t, 127));
  llvm::Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ci(b, t, 0x7fffff)), ci(b, t, 0x3f800000)), t);
  llvm::Value* big = b.CreateFCmpOGT(m, c(b, t, 1.4142135623730951));
  m = b.CreateSelect(big, b.CreateFMul(m, c(b, t, 0.5)), m);
  e = b.CreateSelect(big, b.CreateAdd(e, ci(b, t, 1)), e);
  llvm::Value* ef = b.CreateSIToFP(e, t);
  ef = b.CreateSelect(tiny, b.CreateFSub(ef, c(b, t, 23.0)), ef);
  llvm::Value* s = b.CreateFDiv(b.CreateFSub(m, c(b, t, 1.0)), b.CreateFAdd(m, c(b, t, 1.0)));
  llvm::Value* s2 = b.CreateFMul(s, s);
  llvm::Value* series = poly(b, s2, {2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9});
  llvm::Value* result = b.CreateFAdd(b.CreateFMul(s, series), b.CreateFMul(ef, c(b, t, 0.6931471805599453)));
  result = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, t, 0.0)), c(b, t, -INFINITY), result);
  result = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, t, INFINITY)), x, result);
  return b.CreateSelect(b.CreateFCmpULT(x, c(b, t, 0.0)), c(b, t, NAN), result);
}

// erf: Abramowitz & Stegun 7.1.26, 1 - (a1 t + ... + a5 t^5) e^{-x^2} with t = 1/(1 + p|x|); abs. error
// < 1.5e-7; odd symmetry restores the sign.
llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  llvm::Value* tt = b.CreateFDiv(c(b, t, 1.0), b.CreateFAdd(c(b, t, 1.0), b.CreateFMul(ax, c(b, t, 0.3275911))));
  llvm::Value* p = b.CreateFMul(tt, poly(b, tt, {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429}));
  llvm::Value* y = b.CreateFSub(c(b, t, 1.0), b.CreateFMul(p, emit_exp(b, b.CreateFNeg(b.CreateFMul(ax, ax)))));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, y, x);
}

// tanh: odd Taylor polynomial below |x| = 0.3 (error < 1e-9 there), else 1 - 2/(e^{2|x|} + 1) with the
// sign restored; saturates to +-1.
llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  llvm::Value* x2 = b.CreateFMul(x, x);
  llvm::Value* small = b.CreateFMul(x, poly(b, x2, {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315}));
  llvm::Value* e2 = emit_exp(b, b.CreateFMul(b.CreateMinNum(ax, c(b, t, 20.0)), c(b, t, 2.0)));
  llvm::Value* large = b.CreateFSub(c(b, t, 1.0), b.CreateFDiv(c(b, t, 2.0), b.CreateFAdd(e2, c(b, t, 1.0))));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  llvm::Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, c(b, t, 0.3)), small, large);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  return b.CreateFDiv(c(b, t, 1.0), b.CreateFAdd(c(b, t, 1.0), emit_exp(b, b.CreateFNeg(x))));
}

}  // namespace kiln::llvm_backend
