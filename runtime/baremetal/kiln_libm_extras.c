/* Math functions LLVM calls where a Cortex-M FPU has no instruction for an operation and newlib has no
 * function: roundevenf and roundeven (C23), which llvm.roundeven becomes on FPv4 (the Cortex-M4 has no
 * vrintn). kiln compiles this file into every bare-metal package, so firmware links without a newer C
 * library. Weak: a C library that has them wins. */
#include <stdint.h>
#include <string.h>

/* Round half to even. Adding and subtracting 2^23 (2^52) rounds in the FPU's default mode, round to
 * nearest even; values that large are integers already, and NaN and infinities pass through. */
__attribute__((weak)) float roundevenf(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  const uint32_t sign = bits & 0x80000000u, magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x4b000000u) return x; /* |x| >= 2^23, inf or NaN */
  float a;
  memcpy(&a, &magnitude, sizeof a);
  volatile float shifted = a + 8388608.0f;
  float r = shifted - 8388608.0f;
  uint32_t rbits;
  memcpy(&rbits, &r, sizeof rbits);
  rbits |= sign; /* -0.4 rounds to -0.0 */
  memcpy(&r, &rbits, sizeof r);
  return r;
}

__attribute__((weak)) double roundeven(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  const uint64_t sign = bits & 0x8000000000000000ull, magnitude = bits & 0x7fffffffffffffffull;
  if (magnitude >= 0x4330000000000000ull) return x; /* |x| >= 2^52, inf or NaN */
  double a;
  memcpy(&a, &magnitude, sizeof a);
  volatile double shifted = a + 4503599627370496.0;
  double r = shifted - 4503599627370496.0;
  uint64_t rbits;
  memcpy(&rbits, &r, sizeof rbits);
  rbits |= sign;
  memcpy(&r, &rbits, sizeof r);
  return r;
}
