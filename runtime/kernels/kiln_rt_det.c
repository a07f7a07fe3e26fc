/* kiln_rt_det: Det as a runtime kernel. Elimination picks pivots by value (row swaps depend on the
 * data), which a static loop nest cannot express. Mirrors the reference (frontend/ops/det_op.cc):
 * Gaussian elimination with partial pivoting in double, whatever the input's float width. */
#include "kiln_rt_kernels.h"

static double magnitude(double v) { return v < 0 ? -v : v; } /* fabs without libm */

/* Destroys the n x n matrix a. */
static double lu_determinant(double* a, int64_t n) {
  double det = 1.0;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (magnitude(a[r * n + col]) > magnitude(a[pivot * n + col])) pivot = r;
    if (a[pivot * n + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t c = 0; c < n; ++c) {
        double t = a[col * n + c];
        a[col * n + c] = a[pivot * n + c];
        a[pivot * n + c] = t;
      }
      det = -det;
    }
    double p = a[col * n + col];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      double f = a[r * n + col] / p;
      if (f == 0.0) continue;
      for (int64_t c = col + 1; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
    }
  }
  return det;
}

void kiln_rt_det(const void* x, void* y, double* scratch, int64_t dtype, int64_t batch, int64_t n) {
  const int64_t nn = n * n;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < nn; ++i)
      scratch[i] = dtype == KILN_RT_FLOAT64 ? ((const double*)x)[b * nn + i] : (double)((const float*)x)[b * nn + i];
    double det = lu_determinant(scratch, n);
    if (dtype == KILN_RT_FLOAT64) ((double*)y)[b] = det;
    else ((float*)y)[b] = (float)det;
  }
}
