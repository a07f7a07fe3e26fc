/* sgemm_openblas M N K REPEAT: OpenBLAS's row-major sgemm C = A x B, timed like kiln's runner (one
 * untimed call, then the median of REPEAT calls). Threads come from OPENBLAS_NUM_THREADS.
 * Prints "median: X ms, G GFLOPS, min Y ms". Build: cc -O2 sgemm_openblas.c -lopenblas. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: sgemm_openblas M N K REPEAT\n");
    return 2;
  }
  const int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), repeat = atoi(argv[4]);
  if (m <= 0 || n <= 0 || k <= 0 || repeat <= 0) {
    fprintf(stderr, "sgemm_openblas: sizes and repeat must be positive\n");
    return 2;
  }
  float* a = malloc(sizeof(float) * m * k);
  float* b = malloc(sizeof(float) * k * n);
  float* c = malloc(sizeof(float) * m * n);
  double* t = malloc(sizeof(double) * repeat);
  if (!a || !b || !c || !t) return 1;
  for (long i = 0; i < (long)m * k; ++i) a[i] = (float)((i * 7 % 13) - 6) / 7.0f;
  for (long i = 0; i < (long)k * n; ++i) b[i] = (float)((i * 5 % 11) - 5) / 5.0f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  for (int r = 0; r < repeat; ++r) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    t[r] = now() - t0;
  }
  qsort(t, repeat, sizeof(double), cmp);
  const double med = t[repeat / 2];
  printf("median: %.4f ms, %.1f GFLOPS, min %.4f ms\n", med * 1e3, 2.0 * m * n * k / med / 1e9, t[0] * 1e3);
  free(a), free(b), free(c), free(t);
  return 0;
}
