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


// The same shape as t (scalar or vector) with another element type.
llvm::Type* like(llvm::Type* t, llvm::Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t)) return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

llvm::Value* cl(llvm::IRBuilder<>& b, llvm::Type* t, int64_t v) {
  return llvm::ConstantInt::get(like(t, b.getInt64Ty()), static_cast<uint64_t>(v), true);
}

// 2^n for an integer-valued double vector n in [-1022, 1023], built in the exponent bits.
llvm::Value* exp2i_double(llvm::IRBuilder<>& b, llvm::Value* n) {
  llvm::Type* dt = n->getType();
  llvm::Value* ni = b.CreateFPToSI(n, like(dt, b.getInt64Ty()));
  return b.CreateBitCast(b.CreateShl(b.CreateAdd(ni, cl(b, dt, 1023)), cl(b, dt, 52)), dt);
}

// log1p(u) = log(1 + u) * u / ((1 + u) - 1) (Goldberg): exact cancellation of the rounding of 1 + u,
// so it keeps emit_log's relative accuracy (< 2e-7) for tiny u.
llvm::Value* log1p(llvm::IRBuilder<>& b, llvm::Value* u) {
  llvm::Type* t = u->getType();
  llvm::Value* w = b.CreateFAdd(c(b, t, 1.0), u);
  llvm::Value* wm1 = b.CreateFSub(w, c(b, t, 1.0));
  llvm::Value* r = b.CreateFDiv(b.CreateFMul(emit_log(b, w), u), wm1);
  r = b.CreateSelect(b.CreateFCmpOEQ(u, c(b, t, INFINITY)), u, r);
  return b.CreateSelect(b.CreateFCmpOEQ(wm1, c(b, t, 0.0)), u, r);
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

namespace {

// Reduces |x| (float) to |x| * 2/pi = n + f exactly enough for the whole float range (a Payne-Hanek
// reduction without tables): 2/pi is split into 9 chunks P_k of 24 bits, |x| * P_k is exact in double
// and reduced mod 4 exactly (p - 4 floor(p/4), Sterbenz), so the sum of the residues carries the
// quadrant and the fraction (integer parts summed exactly, fractions with TwoSum compensation, so f is
// accurate to ~1e-16 relative even for the floats closest to a multiple of pi/2); the dropped tail is
// < 2^128 * 2^-216. Returns r = f * pi/2 in double (|r| <= pi/4) and the quadrant n mod 4 as i64.
std::pair<llvm::Value*, llvm::Value*> reduce_pio2(llvm::IRBuilder<>& b, llvm::Value* ax) {
  static const uint32_t chunks[] = {0xa2f983, 0x6e4e44, 0x1529fc, 0x2757d1, 0xf534dd,
                                    0xc0db62, 0x95993c, 0x439041, 0xfe5163};
  llvm::Type* dt = like(ax->getType(), b.getDoubleTy());
  llvm::Value* xd = b.CreateFPExt(ax, dt);
  llvm::Value* ints = c(b, dt, 0.0);  // sum of the residues' integer parts: exact
  llvm::Value* s = c(b, dt, 0.0);     // sum of their fractional parts (each in [-1/2, 1/2]) ...
  llvm::Value* err = c(b, dt, 0.0);   // ... and its rounding error (TwoSum), for f near 0
  for (int k = 0; k < 9; ++k) {
    double pk = std::ldexp(static_cast<double>(chunks[k]), -24 * (k + 1));
    llvm::Value* p = b.CreateFMul(xd, c(b, dt, pk));
    llvm::Value* q = intrinsic(b, llvm::Intrinsic::floor, b.CreateFMul(p, c(b, dt, 0.25)));
    llvm::Value* res = b.CreateFSub(p, b.CreateFMul(q, c(b, dt, 4.0)));
    llvm::Value* ir = intrinsic(b, llvm::Intrinsic::roundeven, res);
    llvm::Value* fr = b.CreateFSub(res, ir);
    ints = b.CreateFAdd(ints, ir);
    llvm::Value* sn = b.CreateFAdd(s, fr);
    llvm::Value* bb = b.CreateFSub(sn, s);
    err = b.CreateFAdd(err, b.CreateFAdd(b.CreateFSub(s, b.CreateFSub(sn, bb)), b.CreateFSub(fr, bb)));
    s = sn;
  }
  llvm::Value* sr = intrinsic(b, llvm::Intrinsic::roundeven, s);
  llvm::Value* n = b.CreateFAdd(ints, sr);
  llvm::Value* f = b.CreateFAdd(b.CreateFSub(s, sr), err);
  llvm::Value* r = b.CreateFMul(f, c(b, dt, 1.5707963267948966));
  // n can only be NaN for x = inf/NaN, where r is NaN and the result is NaN regardless.
  n = b.CreateSelect(b.CreateFCmpUNO(n, n), c(b, dt, 0.0), n);
  llvm::Value* ni = b.CreateAnd(b.CreateFPToSI(n, like(dt, b.getInt64Ty())), cl(b, dt, 3));
  return {r, ni};
}

// sin and cos of r in [-pi/4, pi/4] in double by Taylor polynomials to r^11 / r^12 (abs. error < 1e-11).
llvm::Value* sin_poly(llvm::IRBuilder<>& b, llvm::Value* r) {
  llvm::Value* r2 = b.CreateFMul(r, r);
  return b.CreateFMul(r, poly(b, r2, {1.0, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800}));
}
llvm::Value* cos_poly(llvm::IRBuilder<>& b, llvm::Value* r) {
  llvm::Value* r2 = b.CreateFMul(r, r);
  return poly(b, r2, {1.0, -0.5, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600});
}

// sin(|x|) and cos(|x|) in double from the quadrant.
std::pair<llvm::Value*, llvm::Value*> sincos_abs(llvm::IRBuilder<>& b, llvm::Value* ax) {
  auto [r, n] = reduce_pio2(b, ax);
  llvm::Type* dt = r->getType();
  llvm::Value* s = sin_poly(b, r);
  llvm::Value* co = cos_poly(b, r);
  llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(n, cl(b, dt, 1)), cl(b, dt, 0));
  llvm::Value* sv = b.CreateSelect(odd, co, s);
  llvm::Value* cv = b.CreateSelect(odd, s, co);
  // sin negative in quadrants 2, 3; cos negative in quadrants 1, 2.
  llvm::Value* sneg = b.CreateICmpNE(b.CreateAnd(n, cl(b, dt, 2)), cl(b, dt, 0));
  llvm::Value* cneg = b.CreateOr(b.CreateICmpEQ(n, cl(b, dt, 1)), b.CreateICmpEQ(n, cl(b, dt, 2)));
  sv = b.CreateSelect(sneg, b.CreateFNeg(sv), sv);
  cv = b.CreateSelect(cneg, b.CreateFNeg(cv), cv);
  return {sv, cv};
}

// atan on float by Cephes atanf: reduce |x| to [0, tan(pi/8)] via pi/2 - atan(1/x) above tan(3pi/8) and
// pi/4 + atan((x-1)/(x+1)) above tan(pi/8), then a degree-9 odd minimax polynomial; rel. error < 2e-7.
llvm::Value* atan_abs(llvm::IRBuilder<>& b, llvm::Value* ax) {
  llvm::Type* t = ax->getType();
  llvm::Value* big = b.CreateFCmpOGT(ax, c(b, t, 2.414213562373095));
  llvm::Value* mid = b.CreateFCmpOGT(ax, c(b, t, 0.4142135623730950));
  llvm::Value* xr = b.CreateSelect(
      big, b.CreateFDiv(c(b, t, -1.0), ax),
      b.CreateSelect(mid, b.CreateFDiv(b.CreateFSub(ax, c(b, t, 1.0)), b.CreateFAdd(ax, c(b, t, 1.0))), ax));
  llvm::Value* y0 = b.CreateSelect(big, c(b, t, 1.5707963267948966), b.CreateSelect(mid, c(b, t, 0.7853981633974483), c(b, t, 0.0)));
  llvm::Value* z = b.CreateFMul(xr, xr);
  llvm::Value* p = poly(b, z, {-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2});
  return b.CreateFAdd(y0, b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), xr), xr));
}

}  // namespace

// sin: exact whole-range reduction by pi/2 (reduce_pio2), double polynomials; abs. error < 1e-7 after
// rounding to float (the float rounding dominates). sin(+-inf) = sin(NaN) = NaN; sin(-0) = -0.
llvm::Value* emit_sin(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  auto [s, co] = sincos_abs(b, intrinsic(b, llvm::Intrinsic::fabs, x));
  (void)co;
  // Odd: sin(x) = sign(x) sin(|x|) (a multiply, not copysign: sin(|x|) has its own sign).
  return b.CreateFMul(b.CreateFPTrunc(s, t), b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, c(b, t, 1.0), x));
}

// cos: as sin, abs. error < 1e-7.
llvm::Value* emit_cos(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  auto [s, co] = sincos_abs(b, intrinsic(b, llvm::Intrinsic::fabs, x));
  (void)s;
  return b.CreateFPTrunc(co, t);
}

// tan = sin/cos in double after the shared reduction; rel. error < 1e-7 (the double quotient is
// accurate to ~1e-14 / |cos|, and |cos| >= 1e-9 for every float input).
llvm::Value* emit_tan(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  auto [s, co] = sincos_abs(b, intrinsic(b, llvm::Intrinsic::fabs, x));
  return b.CreateFMul(b.CreateFPTrunc(b.CreateFDiv(s, co), t), b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, c(b, t, 1.0), x));
}

// atan: atan_abs with odd symmetry; rel. error < 2e-7; atan(+-inf) = +-pi/2.
llvm::Value* emit_atan(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* r = atan_abs(b, intrinsic(b, llvm::Intrinsic::fabs, x));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

// asin(x) = atan(x / sqrt((1-x)(1+x))) ((1-x) and (1+x) exact near |x| = 1); rel. error < 3e-7;
// asin(+-1) = +-pi/2, NaN outside [-1, 1].
llvm::Value* emit_asin(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* d = b.CreateFMul(b.CreateFSub(c(b, t, 1.0), x), b.CreateFAdd(c(b, t, 1.0), x));
  return emit_atan(b, b.CreateFDiv(x, intrinsic(b, llvm::Intrinsic::sqrt, d)));
}

// acos(x) = 2 atan(sqrt((1-x)/(1+x))); rel. error < 4e-7; acos(-1) = pi, NaN outside [-1, 1].
llvm::Value* emit_acos(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* q = b.CreateFDiv(b.CreateFSub(c(b, t, 1.0), x), b.CreateFAdd(c(b, t, 1.0), x));
  return b.CreateFMul(c(b, t, 2.0), atan_abs(b, intrinsic(b, llvm::Intrinsic::sqrt, q)));
}

namespace {
// h = e^|x| / 2 as (e^{|x|/2} / 2) * e^{|x|/2}, which stays finite wherever sinh/cosh do; rel. error < 5e-7.
llvm::Value* half_exp_abs(llvm::IRBuilder<>& b, llvm::Value* ax) {
  llvm::Type* t = ax->getType();
  llvm::Value* e = emit_exp(b, b.CreateFMul(ax, c(b, t, 0.5)));
  return b.CreateFMul(b.CreateFMul(e, c(b, t, 0.5)), e);
}
}  // namespace

// sinh: odd Taylor polynomial to x^9 below |x| = 1 (rel. error < 3e-8), else h - 1/(4h) with
// h = e^|x|/2 (rel. error < 6e-7, no cancellation above 1), sign restored; overflows to +-inf.
llvm::Value* emit_sinh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  llvm::Value* x2 = b.CreateFMul(x, x);
  llvm::Value* small = b.CreateFMul(x, poly(b, x2, {1.0, 1.0 / 6, 1.0 / 120, 1.0 / 5040, 1.0 / 362880}));
  llvm::Value* h = half_exp_abs(b, ax);
  llvm::Value* large = b.CreateFSub(h, b.CreateFDiv(c(b, t, 0.25), h));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  return b.CreateSelect(b.CreateFCmpOLT(ax, c(b, t, 1.0)), small, large);
}

// cosh = h + 1/(4h) with h = e^|x|/2; rel. error < 6e-7; overflows to inf.
llvm::Value* emit_cosh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* h = half_exp_abs(b, intrinsic(b, llvm::Intrinsic::fabs, x));
  return b.CreateFAdd(h, b.CreateFDiv(c(b, t, 0.25), h));
}

// asinh(|x|) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (accurate for tiny x), log(|x|) + ln2 above
// 2^28 (where x^2 would lose or overflow); sign restored; rel. error < 5e-7.
llvm::Value* emit_asinh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  llvm::Value* big = b.CreateFCmpOGT(ax, c(b, t, 268435456.0));
  llvm::Value* as = b.CreateSelect(big, c(b, t, 1.0), ax);
  llvm::Value* x2 = b.CreateFMul(as, as);
  llvm::Value* u = b.CreateFAdd(as, b.CreateFDiv(x2, b.CreateFAdd(c(b, t, 1.0), intrinsic(b, llvm::Intrinsic::sqrt, b.CreateFAdd(c(b, t, 1.0), x2)))));
  llvm::Value* r = b.CreateSelect(big, b.CreateFAdd(emit_log(b, ax), c(b, t, 0.6931471805599453)), log1p(b, u));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

// acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1), log(x) + ln2 above 2^28;
// rel. error < 5e-7; NaN below 1.
llvm::Value* emit_acosh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* big = b.CreateFCmpOGT(x, c(b, t, 268435456.0));
  llvm::Value* tm = b.CreateFSub(b.CreateSelect(big, c(b, t, 2.0), x), c(b, t, 1.0));
  llvm::Value* u = b.CreateFAdd(tm, intrinsic(b, llvm::Intrinsic::sqrt, b.CreateFMul(tm, b.CreateFAdd(tm, c(b, t, 2.0)))));
  llvm::Value* r = b.CreateSelect(big, b.CreateFAdd(emit_log(b, x), c(b, t, 0.6931471805599453)), log1p(b, u));
  return b.CreateSelect(b.CreateFCmpOLT(x, c(b, t, 1.0)), c(b, t, NAN), r);
}

// atanh(x) = sign(x) / 2 * log1p(2|x| / (1 - |x|)); rel. error < 5e-7; +-inf at +-1, NaN beyond.
llvm::Value* emit_atanh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  llvm::Value* u = b.CreateFDiv(b.CreateFMul(ax, c(b, t, 2.0)), b.CreateFSub(c(b, t, 1.0), ax));
  llvm::Value* r = b.CreateFMul(log1p(b, u), c(b, t, 0.5));
  r = b.CreateSelect(b.CreateFCmpOGT(ax, c(b, t, 1.0)), c(b, t, NAN), r);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

// pow(x, y) for float: 2^(y log2|x|) evaluated in double (log2 of the mantissa by the atanh series to
// s^13, exp2 of the fraction by Taylor to degree 11, 2^n in the exponent bits), so the result before
// the final rounding to float has rel. error < 1e-12 for all y; the float rounding handles overflow and
// underflow. Then C's rules: sign for negative x and odd integer y, NaN for finite x < 0 and finite
// non-integer y, pow(x, +-0) = pow(1, y) = pow(-1, +-inf) = 1, NaN propagation otherwise.
llvm::Value* emit_pow(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) {
  llvm::Type* t = x->getType();
  llvm::Type* it = int_type_like(b, t);
  llvm::Type* dt = like(t, b.getDoubleTy());
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  // log2|x| in double.
  llvm::Value* tiny = b.CreateFCmpOLT(ax, c(b, t, 1.1754943508222875e-38));
  llvm::Value* xs = b.CreateSelect(tiny, b.CreateFMul(ax, c(b, t, 8388608.0)), ax);
  llvm::Value* bits = b.CreateBitCast(xs, it);
  llvm::Value* e = b.CreateSub(b.CreateLShr(bits, ci(b, t, 23)), ci(b, t, 127));
  llvm::Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ci(b, t, 0x7fffff)), ci(b, t, 0x3f800000)), t);
  llvm::Value* bigm = b.CreateFCmpOGT(m, c(b, t, 1.4142135623730951));
  m = b.CreateSelect(bigm, b.CreateFMul(m, c(b, t, 0.5)), m);
  e = b.CreateSelect(bigm, b.CreateAdd(e, ci(b, t, 1)), e);
  llvm::Value* ed = b.CreateSIToFP(e, dt);
  ed = b.CreateSelect(tiny, b.CreateFSub(ed, c(b, dt, 23.0)), ed);
  llvm::Value* md = b.CreateFPExt(m, dt);
  llvm::Value* s = b.CreateFDiv(b.CreateFSub(md, c(b, dt, 1.0)), b.CreateFAdd(md, c(b, dt, 1.0)));
  llvm::Value* s2 = b.CreateFMul(s, s);
  llvm::Value* ln_m = b.CreateFMul(s, poly(b, s2, {2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13}));
  llvm::Value* l2 = b.CreateFAdd(ed, b.CreateFMul(ln_m, c(b, dt, 1.4426950408889634)));
  l2 = b.CreateSelect(b.CreateFCmpOEQ(ax, c(b, t, 0.0)), c(b, dt, -INFINITY), l2);
  l2 = b.CreateSelect(b.CreateFCmpOEQ(ax, c(b, t, INFINITY)), c(b, dt, INFINITY), l2);
  l2 = b.CreateSelect(b.CreateFCmpUNO(ax, ax), c(b, dt, NAN), l2);
  // 2^z in double, z clamped to where float results are 0 / inf anyway.
  llvm::Value* z = b.CreateFMul(b.CreateFPExt(y, dt), l2);
  llvm::Value* zc = b.CreateMinNum(b.CreateMaxNum(z, c(b, dt, -400.0)), c(b, dt, 400.0));
  llvm::Value* n = intrinsic(b, llvm::Intrinsic::roundeven, zc);
  llvm::Value* f = b.CreateFMul(b.CreateFSub(zc, n), c(b, dt, 0.6931471805599453));
  llvm::Value* p = poly(b, f, {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
                               1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800});
  llvm::Value* mag = b.CreateFPTrunc(b.CreateFMul(p, exp2i_double(b, n)), t);
  mag = b.CreateSelect(b.CreateFCmpUNO(z, z), c(b, t, NAN), mag);
  // Sign and domain for negative x.
  llvm::Value* yt = intrinsic(b, llvm::Intrinsic::trunc, y);
  llvm::Value* y_int = b.CreateFCmpOEQ(yt, y);
  llvm::Value* yh = b.CreateFMul(y, c(b, t, 0.5));
  llvm::Value* y_odd = b.CreateAnd(y_int, b.CreateFCmpONE(intrinsic(b, llvm::Intrinsic::trunc, yh), yh));
  llvm::Value* x_neg = b.CreateICmpSLT(b.CreateBitCast(x, it), ci(b, t, 0));
  llvm::Value* r = b.CreateSelect(b.CreateAnd(x_neg, y_odd), b.CreateFNeg(mag), mag);
  llvm::Value* finite_neg = b.CreateAnd(b.CreateFCmpOLT(x, c(b, t, 0.0)), b.CreateFCmpONE(x, c(b, t, -INFINITY)));
  llvm::Value* y_finite = b.CreateFCmpONE(intrinsic(b, llvm::Intrinsic::fabs, y), c(b, t, INFINITY));
  r = b.CreateSelect(b.CreateAnd(finite_neg, b.CreateAnd(y_finite, b.CreateNot(y_int))), c(b, t, NAN), r);
  llvm::Value* y_inf = b.CreateFCmpOEQ(intrinsic(b, llvm::Intrinsic::fabs, y), c(b, t, INFINITY));
  llvm::Value* one = b.CreateOr(b.CreateFCmpOEQ(y, c(b, t, 0.0)), b.CreateFCmpOEQ(x, c(b, t, 1.0)));
  one = b.CreateOr(one, b.CreateAnd(b.CreateFCmpOEQ(x, c(b, t, -1.0)), y_inf));
  return b.CreateSelect(one, c(b, t, 1.0), r);
}

// fmod(x, y) for float, exact (like C fmod, the result is always representable): with |x| = mx 2^ex,
// |y| = my 2^ey (24-bit integer mantissas) and |x| >= |y| (so ex >= ey),
// fmod = 2^ey * (mx * (2^(ex-ey) mod my) mod my), where 2^(ex-ey) mod my (ex - ey < 256) is computed
// branch-free by 8 unrolled square-and-double steps in 64-bit integers (all products < 2^48). The
// result has the sign of x; |x| < |y| gives x; NaN for y = 0, x = +-inf or a NaN operand; x for y = +-inf.
llvm::Value* emit_fmod(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) {
  llvm::Type* t = x->getType();
  llvm::Type* it = int_type_like(b, t);
  llvm::Type* lt = like(t, b.getInt64Ty());
  llvm::Type* dt = like(t, b.getDoubleTy());
  auto decompose = [&](llvm::Value* v) {
    llvm::Value* bits = b.CreateAnd(b.CreateBitCast(v, it), ci(b, t, 0x7fffffff));
    llvm::Value* be = b.CreateLShr(bits, ci(b, t, 23));
    llvm::Value* normal = b.CreateICmpNE(be, ci(b, t, 0));
    llvm::Value* mant = b.CreateOr(b.CreateAnd(bits, ci(b, t, 0x7fffff)), b.CreateSelect(normal, ci(b, t, 0x800000), ci(b, t, 0)));
    llvm::Value* ex = b.CreateSub(b.CreateSelect(normal, be, ci(b, t, 1)), ci(b, t, 150));
    return std::make_pair(b.CreateZExt(mant, lt), ex);
  };
  auto [mx, ex] = decompose(x);
  auto [my, ey] = decompose(y);
  my = b.CreateSelect(b.CreateICmpEQ(my, cl(b, t, 0)), cl(b, t, 1), my);  // no division by zero
  llvm::Value* d = b.CreateSub(ex, ey);
  d = b.CreateSelect(b.CreateICmpSLT(d, ci(b, t, 0)), ci(b, t, 0), d);
  d = b.CreateZExt(b.CreateAnd(d, ci(b, t, 255)), lt);
  llvm::Value* acc = cl(b, t, 1);
  for (int bit = 7; bit >= 0; --bit) {
    acc = b.CreateURem(b.CreateMul(acc, acc), my);
    llvm::Value* set = b.CreateICmpNE(b.CreateAnd(b.CreateLShr(d, cl(b, t, bit)), cl(b, t, 1)), cl(b, t, 0));
    llvm::Value* dbl = b.CreateShl(acc, cl(b, t, 1));
    dbl = b.CreateSelect(b.CreateICmpUGE(dbl, my), b.CreateSub(dbl, my), dbl);
    acc = b.CreateSelect(set, dbl, acc);
  }
  llvm::Value* rem = b.CreateURem(b.CreateMul(b.CreateURem(mx, my), acc), my);
  llvm::Value* scale = exp2i_double(b, b.CreateSIToFP(ey, dt));
  llvm::Value* mag = b.CreateFPTrunc(b.CreateFMul(b.CreateUIToFP(rem, dt), scale), t);
  llvm::Value* r = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, x);
  llvm::Value* ax = intrinsic(b, llvm::Intrinsic::fabs, x);
  llvm::Value* ay = intrinsic(b, llvm::Intrinsic::fabs, y);
  r = b.CreateSelect(b.CreateFCmpOLT(ax, ay), x, r);  // also y = +-inf with finite x
  llvm::Value* bad = b.CreateOr(b.CreateFCmpUNO(x, y), b.CreateOr(b.CreateFCmpOEQ(ay, c(b, t, 0.0)), b.CreateFCmpOEQ(ax, c(b, t, INFINITY))));
  return b.CreateSelect(bad, c(b, t, NAN), r);
}

}  // namespace kiln::llvm_backend
