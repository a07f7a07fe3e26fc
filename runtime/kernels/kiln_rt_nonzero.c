/* kiln_rt_nonzero: NonZero of an input known only at run time (kiln.NonZeroBounded). Compaction is
 * data-dependent, not a loop nest. An element is nonzero when any bit but a float's sign bit is set
 * (so -0.0 is zero and NaN is not), which serves every dtype by its size alone. */
#define KILN_RT_KERNEL_SOURCE
#include "kiln_rt_kernels.h"

static int is_nonzero(const unsigned char* p, int64_t dtype) {
  switch (dtype) {
    case KILN_RT_FLOAT32: {
      uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
      return (v & 0x7fffffffu) != 0;
    }
    case KILN_RT_FLOAT64: {
      int k, any = p[7] & 0x7f;
      for (k = 0; k < 7; ++k) any |= p[k];
      return any != 0;
    }
    case KILN_RT_FLOAT16:
    case KILN_RT_BFLOAT16: return (p[0] | (p[1] & 0x7f)) != 0;
    default: break;
  }
  {
    const int64_t size = kiln_rt_element_size(dtype);
    int64_t k;
    for (k = 0; k < size; ++k)
      if (p[k]) return 1;
    return 0;
  }
}

void kiln_rt_nonzero(const void* x, int64_t* y, int64_t* count, int64_t dtype, int64_t elements, int64_t rank,
                     int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4, int64_t d5, int64_t d6, int64_t d7) {
  const int64_t dims[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
  const unsigned char* bytes = (const unsigned char*)x;
  const int64_t size = kiln_rt_element_size(dtype);
  int64_t n = 0, i, a;
  for (i = 0; i < elements; ++i) {
    int64_t rest = i;
    if (!is_nonzero(bytes + i * size, dtype)) continue;
    for (a = rank - 1; a >= 0; --a) {
      y[a * elements + n] = rest % dims[a];
      rest /= dims[a];
    }
    ++n;
  }
  *count = n;
  for (a = 0; a < rank; ++a)
    for (i = n; i < elements; ++i) y[a * elements + i] = 0;
}
