/* kiln_parallel_pthread.c: a persistent pthread pool for the parallel_for hook of kiln models.
 * C11 + POSIX threads only; see kiln_parallel_pthread.h for the contract.
 *
 * Design: workers are started once and sleep on a condition variable. A call publishes the job
 * (fn, closure, n, chunk count) under the pool lock, bumps a generation counter and wakes everyone.
 * Workers and the caller then claim chunk numbers from an atomic counter, so a worker that wakes late
 * costs nothing: the others (or the caller) take its chunks. The caller returns only after every worker
 * has checked in for this generation, so no worker can still be reading the job when the next call
 * overwrites it, and every fn's writes are visible to the caller (they are published by the lock). */
#define _POSIX_C_SOURCE 200809L

#include "kiln_parallel_pthread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct kiln_pthread_pool {
  int threads; /* workers + the calling thread */
  int workers;
  pthread_t* handles;
  /* Serialises kiln_pthread_parallel_for calls: the job below describes one call at a time. */
  pthread_mutex_t call_lock;
  /* Guards generation, busy, stop and the job fields. */
  pthread_mutex_t lock;
  pthread_cond_t wake; /* workers: a new generation, or stop */
  pthread_cond_t idle; /* the caller: busy reached 0 */
  uint64_t generation;
  int busy; /* workers that have not finished the current generation */
  int stop;
  void (*fn)(void*, int64_t);
  void* closure;
  int64_t n;
  int64_t chunks;
  atomic_int_fast64_t next_chunk;
};

/* The pool whose tasks this thread is running (a worker: always its pool). A nested call on the same
 * pool would wait for call_lock, which its own caller holds; such calls run serially instead. */
static _Thread_local kiln_pthread_pool* tls_running_pool;

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

static void* worker_main(void* arg) {
  kiln_pthread_pool* p = (kiln_pthread_pool*)arg;
  tls_running_pool = p;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    run_chunks(p);
    pthread_mutex_lock(&p->lock);
    if (--p->busy == 0) pthread_cond_signal(&p->idle);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static void stop_and_join(kiln_pthread_pool* p, int started) {
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
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
  if (pthread_cond_init(&p->idle, NULL) != 0) goto fail_idle;
  for (int i = 0; i < p->workers; ++i) {
    if (pthread_create(&p->handles[i], NULL, worker_main, p) != 0) {
      stop_and_join(p, i);
      goto fail_threads;
    }
  }
  return p;

fail_threads:
  pthread_cond_destroy(&p->idle);
fail_idle:
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
  pthread_cond_destroy(&p->idle);
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
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->closure = closure;
  p->n = n;
  p->chunks = n < p->threads ? n : p->threads;
  atomic_store_explicit(&p->next_chunk, 0, memory_order_relaxed);
  p->busy = p->workers;
  ++p->generation;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);

  kiln_pthread_pool* outer = tls_running_pool;
  tls_running_pool = p;
  run_chunks(p);
  tls_running_pool = outer;

  pthread_mutex_lock(&p->lock);
  while (p->busy > 0) pthread_cond_wait(&p->idle, &p->lock);
  pthread_mutex_unlock(&p->lock);
  pthread_mutex_unlock(&p->call_lock);
}
