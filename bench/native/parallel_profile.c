/* parallel_profile: where a kiln package's time goes with two threads, per parallel loop and thread.
 *
 * Links a compiled package (bench/parallel_profile.sh builds it) with its own parallel_for: the
 * calling thread runs the first half of every parallel loop's indices and one worker thread (spinning,
 * never sleeping) the second half, as the package's pthread pool does with two threads. For the last
 * of REPEAT runs it records, per parallel loop: its length, the task function's address (the script
 * names it from the symbol table: <m>_kernel.sN.taskK is statement N of `kiln dump --dump-after lower`),
 * each half's time, how late the worker started and how long the caller waited for it. With THREADS=1
 * the same loops run whole on the caller, timed the same way, so the two outputs compare loop by loop.
 * With THREADS=turns the two halves run one after the other (the worker starts when the caller's half
 * is done): the same split and the same moves of data between the cores, without running together. Its
 * time near the 1-thread time says the split costs nothing; far above it, that moving data between the
 * cores costs (or, when it changes from one run of the script to the next, that the host slows the
 * second core: a shared host's neighbours).
 *
 * Inputs are filled with a fixed pattern in [-0.5, 0.5): timing, not values. With KP_EVERY set in the
 * environment, every run's time goes to stderr (to see whether run times are bimodal).
 * Build (bench/parallel_profile.sh does): cc -O2 -I PKG -DKP_HEADER='"m.h"' -DKP_M=m -DKP_NUM_INPUTS=1
 *   -DKP_SIZES='{input bytes..., output bytes..., workspace bytes}' parallel_profile.c PKG/libm.a -lpthread -lm
 * <m>_inputs and <m>_outputs are structs of one pointer per tensor, so an array of pointers stands in. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include KP_HEADER

#define PASTE2(a, b) a##b
#define PASTE(a, b) PASTE2(a, b)
#define RUN PASTE(KP_M, _run)
#define CONTEXT PASTE(KP_M, _context)
#define INPUTS PASTE(KP_M, _inputs)
#define OUTPUTS PASTE(KP_M, _outputs)

typedef void (*task_fn)(void*, int64_t);
typedef struct {
  void (*parallel_for)(void*, int64_t, task_fn, void*);
  void* user;
} context_abi; /* the layout of every package's <m>_context */

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

enum { kMaxCalls = 8192 };
typedef struct {
  void* fn;
  int64_t n;
  long long caller_ns, worker_ns, worker_delay_ns, wait_ns;
} call_record;
static call_record records[kMaxCalls];
static int num_records, recording, serial, turns;

static struct {
  task_fn fn;
  void* closure;
  int64_t lo, hi;
} job;
static atomic_long generation;
static atomic_int job_done;
static long long worker_start, worker_end;

static void* worker_main(void* unused) {
  (void)unused;
  long seen = 0;
  for (;;) {
    long g;
    while ((g = atomic_load(&generation)) == seen) __builtin_ia32_pause();
    seen = g;
    worker_start = now_ns();
    for (int64_t i = job.lo; i < job.hi; ++i) job.fn(job.closure, i);
    worker_end = now_ns();
    atomic_store(&job_done, 1);
  }
  return NULL;
}

static void profiled_parallel_for(void* user, int64_t n, task_fn fn, void* closure) {
  (void)user;
  const long long t0 = now_ns();
  call_record r = {(void*)fn, n, 0, 0, 0, 0};
  if (serial || n < 2) {
    for (int64_t i = 0; i < n; ++i) fn(closure, i);
    r.caller_ns = now_ns() - t0;
  } else {
    const int64_t half = (n + 1) / 2;
    job.fn = fn;
    job.closure = closure;
    job.lo = half;
    job.hi = n;
    atomic_store(&job_done, 0);
    if (!turns) atomic_fetch_add(&generation, 1);
    for (int64_t i = 0; i < half; ++i) fn(closure, i);
    if (turns) atomic_fetch_add(&generation, 1);
    const long long t1 = now_ns();
    while (!atomic_load(&job_done)) __builtin_ia32_pause();
    r.caller_ns = t1 - t0;
    r.wait_ns = now_ns() - t1;
    r.worker_ns = worker_end - worker_start;
    r.worker_delay_ns = worker_start - t0;
  }
  if (recording && num_records < kMaxCalls) records[num_records++] = r;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s 1|2|turns REPEAT\n", argv[0]);
    return 2;
  }
  serial = strcmp(argv[1], "1") == 0;
  turns = strcmp(argv[1], "turns") == 0;
  const int repeat = atoi(argv[2]);
  const long long sizes[] = KP_SIZES; /* bytes of each input, each output, then the workspace */
  enum { kArgs = sizeof sizes / sizeof sizes[0] };
  void* args[kArgs];
  for (int a = 0; a < kArgs; ++a) {
    float* p = aligned_alloc(64, (size_t)((sizes[a] + 63) / 64 * 64 + 64));
    for (long long i = 0; i < sizes[a] / 4; ++i) p[i] = (float)((i * 7919) % 1000) / 1000.f - 0.5f;
    args[a] = p;
  }
  context_abi ctx = {profiled_parallel_for, NULL};
  pthread_t worker;
  if (!serial) pthread_create(&worker, NULL, worker_main, NULL);
  long long best = -1;
  for (int r = 0; r <= repeat; ++r) { /* run 0 warms up */
    recording = r == repeat;
    const long long t0 = now_ns();
    if (RUN((const CONTEXT*)&ctx, (const INPUTS*)args, (OUTPUTS*)(args + KP_NUM_INPUTS), args[kArgs - 1]) != 0) {
      fprintf(stderr, "parallel_profile: the model's run failed\n");
      return 1;
    }
    const long long t = now_ns() - t0;
    if (r > 0 && (best < 0 || t < best)) best = t;
    if (getenv("KP_EVERY")) fprintf(stderr, "run %d: %.3f ms\n", r, t / 1e6);
  }
  printf("best %.3f ms over %d run(s), %s\n", best / 1e6, repeat, serial ? "1 thread" : turns ? "2 threads in turns" : "2 threads");
  for (int i = 0; i < num_records; ++i) {
    const call_record* c = &records[i];
    printf("call %d fn %p n %lld caller_us %.1f worker_us %.1f worker_delay_us %.1f wait_us %.1f\n", i, c->fn,
           (long long)c->n, c->caller_ns / 1e3, c->worker_ns / 1e3, c->worker_delay_ns / 1e3, c->wait_ns / 1e3);
  }
  return 0;
}
