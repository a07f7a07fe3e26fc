/* fma_peak: this core's single-precision FMA peak, the denominator of the bench scripts' "% of peak".
 *
 * Twelve independent accumulator chains of the widest FMAs the build targets (512-bit with AVX-512,
 * else 256-bit AVX2 FMAs: more chains than latency x throughput needs, so the loop is bound by the FMA
 * ports, not by the dependency chains); each FMA is LANES lanes x 2 flops. Prints "peak: G GFLOPS"
 * for one thread, the best of several runs. Build: cc -O2 -march=native. */
#include <immintrin.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#else
#error "fma_peak needs AVX-512 or AVX2 with FMA (build with -march=native on such a CPU)"
#endif
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
    const vec m = SET1(0.999999f), c = SET1(1e-7f);
    /* Named accumulators rather than an array: an array may live in memory, and then the loop measures
     * store-to-load forwarding instead of the FMA ports. */
    vec a0 = SET1(0.0f), a1 = SET1(0.1f), a2 = SET1(0.2f),
           a3 = SET1(0.3f), a4 = SET1(0.4f), a5 = SET1(0.5f),
           a6 = SET1(0.6f), a7 = SET1(0.7f), a8 = SET1(0.8f),
           a9 = SET1(0.9f), a10 = SET1(1.0f), a11 = SET1(1.1f);
    double t0 = now();
    for (long k = 0; k < iters; ++k) {
      a0 = FMADD(a0, m, c), a1 = FMADD(a1, m, c), a2 = FMADD(a2, m, c);
      a3 = FMADD(a3, m, c), a4 = FMADD(a4, m, c), a5 = FMADD(a5, m, c);
      a6 = FMADD(a6, m, c), a7 = FMADD(a7, m, c), a8 = FMADD(a8, m, c);
      a9 = FMADD(a9, m, c), a10 = FMADD(a10, m, c), a11 = FMADD(a11, m, c);
    }
    double s = now() - t0;
    vec sum = ADD(ADD(ADD(a0, a1), ADD(a2, a3)),
                               ADD(ADD(a4, a5), ADD(a6, a7)));
    sum = ADD(sum, ADD(ADD(a8, a9), ADD(a10, a11)));
    float lanes[LANES], total = 0;
    STORE(lanes, sum);
    for (int i = 0; i < LANES; ++i) total += lanes[i];
    if (total == 12345.0f) printf("unlikely\n"); /* keeps the chains alive */
    double gflops = iters * 12.0 * LANES * 2 / s / 1e9;
    if (gflops > best) best = gflops;
  }
  printf("peak: %.1f GFLOPS\n", best);
  return 0;
}
