/* kiln_rt_bitcast: BitCast between dtypes of different widths or involving floats reinterprets bytes,
 * which the expression language has no operation for. Both sides are little endian, so it is a copy;
 * a plain loop rather than memcpy keeps the kernel free of library calls in the source. */
#include "kiln_rt_kernels.h"

void kiln_rt_bitcast(const void* x, void* y, int64_t bytes) {
  const unsigned char* src = (const unsigned char*)x;
  unsigned char* dst = (unsigned char*)y;
  for (int64_t i = 0; i < bytes; ++i) dst[i] = src[i];
}
