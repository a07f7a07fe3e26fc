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
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    /* Named accumulators rather than an array: an array may live in memory, and then the loop measures
     * store-to-load forwarding instead of the FMA ports. */
    __m512 a0 = _mm512_set1_ps(0.0f), a1 = _mm512_set1_ps(0.1f), a2 = _mm512_set1_ps(0.2f),
           a3 = _mm512_set1_ps(0.3f), a4 = _mm512_set1_ps(0.4f), a5 = _mm512_set1_ps(0.5f),
           a6 = _mm512_set1_ps(0.6f), a7 = _mm512_set1_ps(0.7f), a8 = _mm512_set1_ps(0.8f),
           a9 = _mm512_set1_ps(0.9f), a10 = _mm512_set1_ps(1.0f), a11 = _mm512_set1_ps(1.1f);
    double t0 = now();
    for (long k = 0; k < iters; ++k) {
      a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c), a2 = _mm512_fmadd_ps(a2, m, c);
      a3 = _mm512_fmadd_ps(a3, m, c), a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
      a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c), a8 = _mm512_fmadd_ps(a8, m, c);
      a9 = _mm512_fmadd_ps(a9, m, c), a10 = _mm512_fmadd_ps(a10, m, c), a11 = _mm512_fmadd_ps(a11, m, c);
    }
    double s = now() - t0;
    __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                               _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    if (_mm512_reduce_add_ps(sum) == 12345.0f) printf("unlikely\n"); /* keeps the chains alive */
    double gflops = iters * 12.0 * 16 * 2 / s / 1e9;
    if (gflops > best) best = gflops;
  }
  printf("peak: %.1f GFLOPS\n", best);
  return 0;
}
