/* cross_core_conv: what reading another core's writes costs a blocked conv micro-kernel, and what a
 * software prefetch one tile ahead gives back (issue 17, step 4).
 *
 * The kernel is kiln's default 1x1 conv tile written by hand: 6 output pixels x 4 output-channel blocks
 * of 16 in 24 zmm accumulators, reducing over 32 input-channel blocks x 16 channels of an NCHW16c
 * 28x28 image (ResNet-50's layer3.0 1x1 conv, one output group). Each turn, the image is first written
 * either by this core or by a second thread pinned to the other core, then the kernel runs on this
 * core; the fastest of 20 turns is reported for each, with and without prefetching the next tile's
 * input lines at every input-channel block. Needs AVX-512F and 2 cores.
 * Build: cc -O3 -mavx512f -mfma -pthread cross_core_conv.c -o cross_core_conv (clang unrolls it fully;
 * gcc's code is slower but shows the same ratios). */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BLOCKS = 32, H = 28, W = 28, LANES = 16, OUT_BLOCKS = 4, TILE = 6, TURNS = 20 };
static float *image, *weights, *output;
static atomic_int request = 0; /* > 0: the writer thread writes the image with that value; < 0: stop */

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void write_image(float v) {
  for (int i = 0; i < BLOCKS * H * W * LANES; ++i) image[i] = v + (float)(i & 255) * 1e-3f;
}

static void* writer(void* unused) {
  (void)unused;
  pin(1);
  for (;;) {
    int r;
    while ((r = atomic_load(&request)) == 0) {
    }
    if (r < 0) return NULL;
    write_image((float)r);
    atomic_store(&request, 0);
  }
}

static void conv(int prefetch) {
  for (int row = 0; row < H; ++row)
    for (int t = 0; t + TILE <= W; t += TILE) {
      __m512 acc[OUT_BLOCKS][TILE];
      for (int m = 0; m < OUT_BLOCKS; ++m)
        for (int i = 0; i < TILE; ++i) acc[m][i] = _mm512_setzero_ps();
      for (int b = 0; b < BLOCKS; ++b) {
        const float* in = image + ((b * H + row) * W + t) * LANES;
        if (prefetch) /* the next tile's pixels: past the row's end they are the next row's first */
          for (int i = 0; i < TILE; ++i) _mm_prefetch((const char*)(in + (TILE + i) * LANES), _MM_HINT_T0);
        const float* wb = weights + b * LANES * OUT_BLOCKS * LANES;
        for (int c = 0; c < LANES; ++c) {
          __m512 w[OUT_BLOCKS];
          for (int m = 0; m < OUT_BLOCKS; ++m) w[m] = _mm512_load_ps(wb + (c * OUT_BLOCKS + m) * LANES);
          for (int i = 0; i < TILE; ++i) {
            __m512 x = _mm512_set1_ps(in[i * LANES + c]);
            for (int m = 0; m < OUT_BLOCKS; ++m) acc[m][i] = _mm512_fmadd_ps(x, w[m], acc[m][i]);
          }
        }
      }
      for (int m = 0; m < OUT_BLOCKS; ++m)
        for (int i = 0; i < TILE; ++i) _mm512_store_ps(output + ((m * H + row) * W + t + i) * LANES, acc[m][i]);
    }
}

int main(void) {
  image = aligned_alloc(64, sizeof(float) * BLOCKS * H * W * LANES);
  weights = aligned_alloc(64, sizeof(float) * BLOCKS * LANES * OUT_BLOCKS * LANES);
  output = aligned_alloc(64, sizeof(float) * OUT_BLOCKS * H * W * LANES);
  if (!image || !weights || !output) return 1;
  for (int i = 0; i < BLOCKS * LANES * OUT_BLOCKS * LANES; ++i) weights[i] = (float)(i & 7) * 0.01f;
  pthread_t other;
  pthread_create(&other, NULL, writer, NULL);
  pin(0);
  for (int prefetch = 0; prefetch < 2; ++prefetch) {
    double here = 1e30, there = 1e30;
    for (int turn = 1; turn <= TURNS; ++turn) {
      write_image((float)turn);
      double t0 = now_ns();
      conv(prefetch);
      double t = now_ns() - t0;
      if (t < here) here = t;
      atomic_store(&request, turn);
      while (atomic_load(&request) != 0) {
      }
      t0 = now_ns();
      conv(prefetch);
      t = now_ns() - t0;
      if (t < there) there = t;
    }
    printf("prefetch %s: image written by this core %7.1f us, by the other core %7.1f us (%.2fx)\n",
           prefetch ? "on " : "off", here / 1e3, there / 1e3, there / here);
  }
  atomic_store(&request, -1);
  pthread_join(other, NULL);
  return 0;
}
