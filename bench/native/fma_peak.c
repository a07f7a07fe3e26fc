/* fma_peak: this core's single-precision FMA peak, the denominator of bench/tune_ops.sh's "% of peak".
 *
 * Twelve independent accumulator chains of 512-bit FMAs (more than latency x throughput needs, so the
 * loop is bound by the FMA ports, not by the dependency chains); each FMA is 16 lanes x 2 flops.
 * Prints "peak: G GFLOPS" for one thread, the best of several runs. Build: cc -O2 -mavx512f. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  const long iters = 50 * 1000 * 1000;
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps((float)i * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    double t0 = now();
    for (long k = 0; k < iters; ++k)
      for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    double s = now() - t0;
    float sink = 0;
    for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(a[i]);
    if (sink == 12345.0f) printf("unlikely\n"); /* keeps the chains alive */
    double gflops = iters * 12.0 * 16 * 2 / s / 1e9;
    if (gflops > best) best = gflops;
  }
  printf("peak: %.1f GFLOPS\n", best);
  return 0;
}
