/* Stress test of runtime/kiln_parallel_pthread.c: every index runs exactly once, for any n and pool
 * size, with several threads sharing one pool, nested calls, workers woken from sleep after an idle
 * spell, and pools created and destroyed in a loop.
 * Exit status 0 on success; prints the first failure. Also built with -fsanitize=thread by the package
 * test. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_parallel_pthread.h"

static atomic_int failures;

static void fail(const char* what, long long a, long long b) {
  if (atomic_fetch_add(&failures, 1) == 0) fprintf(stderr, "FAIL: %s (%lld, %lld)\n", what, a, b);
}

typedef struct {
  atomic_int* hits;
  int64_t n;
} count_job;

static void count_task(void* closure, int64_t i) {
  count_job* j = (count_job*)closure;
  if (i < 0 || i >= j->n) fail("index out of range", (long long)i, (long long)j->n);
  else atomic_fetch_add(&j->hits[i], 1);
}

static void check_once(kiln_pthread_pool* pool, int64_t n) {
  atomic_int* hits = (atomic_int*)calloc((size_t)(n > 0 ? n : 1), sizeof *hits);
  count_job j = {hits, n};
  kiln_pthread_parallel_for(pool, n, count_task, &j);
  for (int64_t i = 0; i < n; ++i)
    if (atomic_load(&hits[i]) != 1) fail("index not run exactly once", (long long)i, atomic_load(&hits[i]));
  free(hits);
}

/* A task that itself calls parallel_for on the same pool: must run serially, not deadlock. */
typedef struct {
  kiln_pthread_pool* pool;
  atomic_long sum;
} nested_job;

static void inner_task(void* closure, int64_t i) { atomic_fetch_add(&((nested_job*)closure)->sum, (long)i); }

static void outer_task(void* closure, int64_t i) {
  nested_job* j = (nested_job*)closure;
  (void)i;
  kiln_pthread_parallel_for(j->pool, 10, inner_task, j);
}

static void* caller_main(void* arg) {
  kiln_pthread_pool* pool = (kiln_pthread_pool*)arg;
  for (int rep = 0; rep < 200; ++rep) check_once(pool, 1 + (rep * 37) % 101);
  return NULL;
}

int main(void) {
  const int sizes[] = {1, 2, 3, 4, 8};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    kiln_pthread_pool* pool = kiln_pthread_pool_create(sizes[s]);
    if (!pool) {
      fprintf(stderr, "FAIL: cannot create a pool of %d\n", sizes[s]);
      return 1;
    }
    if (kiln_pthread_pool_threads(pool) != sizes[s]) fail("threads()", kiln_pthread_pool_threads(pool), sizes[s]);
    const int64_t ns[] = {0, 1, 2, 3, 7, 8, 9, 64, 1000, 100003};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; ++k) check_once(pool, ns[k]);
    /* Idle for longer than the workers spin: they are asleep and must be woken for the next call. */
    struct timespec idle = {0, 5 * 1000 * 1000};
    nanosleep(&idle, NULL);
    check_once(pool, 1000);

    nested_job nj = {pool, 0};
    kiln_pthread_parallel_for(pool, 16, outer_task, &nj);
    if (atomic_load(&nj.sum) != 16 * 45) fail("nested sum", atomic_load(&nj.sum), 16 * 45);

    /* Several "model instances" sharing the pool from their own threads. */
    pthread_t callers[4];
    for (int c = 0; c < 4; ++c) pthread_create(&callers[c], NULL, caller_main, pool);
    for (int c = 0; c < 4; ++c) pthread_join(callers[c], NULL);
    kiln_pthread_pool_destroy(pool);
  }
  for (int rep = 0; rep < 50; ++rep) {
    kiln_pthread_pool* pool = kiln_pthread_pool_create(3);
    if (rep % 2) check_once(pool, 5);
    kiln_pthread_pool_destroy(pool);
  }
  check_once(NULL, 17);                 /* NULL pool: serial */
  kiln_pthread_pool_destroy(NULL);      /* ignored */
  kiln_pthread_pool* any = kiln_pthread_pool_create(0);  /* online CPUs */
  if (!any || kiln_pthread_pool_threads(any) < 1) fail("create(0)", 0, 0);
  check_once(any, 1000);
  kiln_pthread_pool_destroy(any);
  if (atomic_load(&failures)) return 1;
  puts("kiln_parallel_pthread: ok");
  return 0;
}
