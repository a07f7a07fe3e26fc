/* kiln_parallel_pthread.c: a persistent pthread pool for the parallel_for hook of kiln models.
 * C11 + POSIX threads only; see kiln_parallel_pthread.h for the contract.
 *
 * Design: workers are started once. A call publishes the job (fn, closure, n, chunk count), then bumps
 * an atomic generation counter. Workers and the caller claim chunk numbers from an atomic counter, so
 * a worker that starts late costs nothing: the others (or the caller) take its chunks. The caller
 * returns only after every worker has checked in for this generation, so no worker can still be
 * reading the job when the next call overwrites it, and every fn's writes are visible to the caller
 * (release on check-in, acquire in the caller).
 *
 * Waiting spins first: a model runs its kernels back to back, and a worker put to sleep on a
 * condition variable takes tens of microseconds to wake (more on a virtual machine), which made
 * 2-thread runs of small models slower than 1-thread ones. A worker that sees no new generation
 * within kSpinNs goes to sleep on the condition variable; the caller wakes sleepers only when there
 * are some. The caller's own wait for check-ins yields the CPU after a short spin, so that an
 * oversubscribed machine still makes progress. */
#define _POSIX_C_SOURCE 200809L

#include "kiln_parallel_pthread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long an idle worker spins before it sleeps: longer than the gap between two kernels of a model,
 * short enough that an idle pool stops burning its cores almost at once. */
static const int64_t kSpinNs = 200 * 1000;

struct kiln_pthread_pool {
  int threads; /* workers + the calling thread */
  int workers;
  pthread_t* handles;
  /* Serialises kiln_pthread_parallel_for calls: the job below describes one call at a time. */
  pthread_mutex_t call_lock;
  /* Guards sleepers and the sleeping side of generation and stop (see worker_main). */
  pthread_mutex_t lock;
  pthread_cond_t wake; /* sleeping workers: a new generation, or stop */
  int sleepers;        /* workers waiting on `wake` */
  atomic_uint_fast64_t generation;
  atomic_int busy; /* workers that have not finished the current generation */
  atomic_int stop;
  /* The job: written by the caller before it bumps `generation`, read by workers after they see it. */
  void (*fn)(void*, int64_t);
  void* closure;
  int64_t n;
  int64_t chunks;
  atomic_int_fast64_t next_chunk;
};

/* The pool whose tasks this thread is running (a worker: always its pool). A nested call on the same
 * pool would wait for call_lock, which its own caller holds; such calls run serially instead. */
static _Thread_local kiln_pthread_pool* tls_running_pool;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void run_range(void (*fn)(void*, int64_t), void* closure, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) fn(closure, i);
}

/* Claims and runs chunks of the current job until none is left. Chunk c covers
 * [c*q + min(c, r), (c+1)*q + min(c+1, r)) with q = n / chunks, r = n % chunks: sizes differ by at
 * most one, and nothing overflows for any n. */
static void run_chunks(kiln_pthread_pool* p) {
  const int64_t q = p->n / p->chunks, r = p->n % p->chunks;
  for (;;) {
    int64_t c = atomic_fetch_add_explicit(&p->next_chunk, 1, memory_order_relaxed);
    if (c >= p->chunks) return;
    int64_t lo = c * q + (c < r ? c : r);
    int64_t hi = lo + q + (c < r ? 1 : 0);
    run_range(p->fn, p->closure, lo, hi);
  }
}

/* Waits until the generation differs from `seen` or the pool stops: spinning for up to kSpinNs, then
 * asleep on the condition variable. Returns the new generation, or `seen` when stopping. */
static uint64_t wait_for_work(kiln_pthread_pool* p, uint64_t seen) {
  const int64_t until = now_ns() + kSpinNs;
  for (unsigned i = 1;; ++i) {
    if (atomic_load_explicit(&p->stop, memory_order_acquire)) return seen;
    uint64_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
    if (g != seen) return g;
    cpu_relax();
    if (i % 256 == 0 && now_ns() > until) break;
  }
  pthread_mutex_lock(&p->lock);
  ++p->sleepers;
  uint64_t g;
  while (!atomic_load_explicit(&p->stop, memory_order_acquire) &&
         (g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
    pthread_cond_wait(&p->wake, &p->lock);
  --p->sleepers;
  pthread_mutex_unlock(&p->lock);
  return atomic_load_explicit(&p->stop, memory_order_acquire) ? seen : atomic_load_explicit(&p->generation, memory_order_acquire);
}

static void* worker_main(void* arg) {
  kiln_pthread_pool* p = (kiln_pthread_pool*)arg;
  tls_running_pool = p;
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = wait_for_work(p, seen);
    if (g == seen) break; /* stopping */
    seen = g;
    run_chunks(p);
    atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
  }
  return NULL;
}

/* Wakes the workers asleep on `wake` (after a change of generation or stop). A worker that is about
 * to sleep checks both under the lock, so none can miss the change. */
static void wake_sleepers(kiln_pthread_pool* p) {
  pthread_mutex_lock(&p->lock);
  if (p->sleepers > 0) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

static void stop_and_join(kiln_pthread_pool* p, int started) {
  atomic_store_explicit(&p->stop, 1, memory_order_release);
  wake_sleepers(p);
  for (int i = 0; i < started; ++i) pthread_join(p->handles[i], NULL);
}

kiln_pthread_pool* kiln_pthread_pool_create(int threads) {
  if (threads <= 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cpus > 0 ? (cpus > 1024 ? 1024 : (int)cpus) : 1;
  }
  kiln_pthread_pool* p = (kiln_pthread_pool*)calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = threads;
  p->workers = threads - 1;
  atomic_init(&p->next_chunk, 0);
  atomic_init(&p->generation, 0);
  atomic_init(&p->busy, 0);
  atomic_init(&p->stop, 0);
  if (p->workers > 0) {
    p->handles = (pthread_t*)calloc((size_t)p->workers, sizeof *p->handles);
    if (!p->handles) {
      free(p);
      return NULL;
    }
  }
  if (pthread_mutex_init(&p->call_lock, NULL) != 0) goto fail_call_lock;
  if (pthread_mutex_init(&p->lock, NULL) != 0) goto fail_lock;
  if (pthread_cond_init(&p->wake, NULL) != 0) goto fail_wake;
  for (int i = 0; i < p->workers; ++i) {
    if (pthread_create(&p->handles[i], NULL, worker_main, p) != 0) {
      stop_and_join(p, i);
      goto fail_threads;
    }
  }
  return p;

fail_threads:
  pthread_cond_destroy(&p->wake);
fail_wake:
  pthread_mutex_destroy(&p->lock);
fail_lock:
  pthread_mutex_destroy(&p->call_lock);
fail_call_lock:
  free(p->handles);
  free(p);
  return NULL;
}

void kiln_pthread_pool_destroy(kiln_pthread_pool* p) {
  if (!p) return;
  stop_and_join(p, p->workers);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
  pthread_mutex_destroy(&p->call_lock);
  free(p->handles);
  free(p);
}

int kiln_pthread_pool_threads(const kiln_pthread_pool* p) { return p ? p->threads : 1; }

void kiln_pthread_parallel_for(void* user, int64_t n, void (*fn)(void*, int64_t), void* closure) {
  kiln_pthread_pool* p = (kiln_pthread_pool*)user;
  if (n <= 0) return;
  /* Serial cases: no pool or no workers, one index (waking workers would only add latency), or a
   * nested call from one of this pool's own tasks. */
  if (!p || p->workers == 0 || n == 1 || tls_running_pool == p) {
    run_range(fn, closure, 0, n);
    return;
  }
  pthread_mutex_lock(&p->call_lock);
  p->fn = fn;
  p->closure = closure;
  p->n = n;
  p->chunks = n < p->threads ? n : p->threads;
  atomic_store_explicit(&p->next_chunk, 0, memory_order_relaxed);
  atomic_store_explicit(&p->busy, p->workers, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  wake_sleepers(p);

  kiln_pthread_pool* outer = tls_running_pool;
  tls_running_pool = p;
  run_chunks(p);
  tls_running_pool = outer;

  for (unsigned i = 1; atomic_load_explicit(&p->busy, memory_order_acquire) > 0; ++i) {
    if (i < 1024) cpu_relax();
    else sched_yield();
  }
  pthread_mutex_unlock(&p->call_lock);
}
