/* kiln_parallel_pthread.h: an optional, persistent pthread pool that implements the parallel_for hook
 * of a kiln model's context (<m>_context.parallel_for / .user).
 *
 * The generated library never creates threads (see <m>.h); this pool is a separate object that a
 * server links explicitly (kiln_parallel_pthread.o, or compile kiln_parallel_pthread.c with -pthread):
 *
 *   kiln_pthread_pool* pool = kiln_pthread_pool_create(8);
 *   m_context ctx = { kiln_pthread_parallel_for, pool };
 *   m_run(&ctx, &in, &out, workspace);          // any number of times, from any threads
 *   kiln_pthread_pool_destroy(pool);
 *
 * Concurrency: several model instances may call kiln_pthread_parallel_for on one pool at once from
 * different threads. Calls on the same pool are serialised by a mutex: each parallel region gets the
 * whole pool, and the others wait for it. Instances that should run fully in parallel with each other
 * can each use their own pool instead. A call made from inside a task of the same pool (nesting) runs
 * serially on the calling thread rather than deadlocking. */
#ifndef KILN_PARALLEL_PTHREAD_H_
#define KILN_PARALLEL_PTHREAD_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_pthread_pool kiln_pthread_pool;

/* Creates a pool with `threads`-way parallelism: threads - 1 worker threads are started once and the
 * thread calling kiln_pthread_parallel_for is the last participant. threads <= 0 picks the number of
 * online CPUs; threads == 1 starts no workers (every call runs serially). Returns NULL when threads or
 * memory cannot be had. */
kiln_pthread_pool* kiln_pthread_pool_create(int threads);

/* Stops and joins the workers and frees the pool. No call on the pool may be in flight. NULL is ignored. */
void kiln_pthread_pool_destroy(kiln_pthread_pool* pool);

/* The parallelism the pool was created with (workers + the calling thread); 1 for NULL. */
int kiln_pthread_pool_threads(const kiln_pthread_pool* pool);

/* The parallel_for hook: `user` is the pool. Splits [0, n) into at most `threads` contiguous chunks,
 * runs them on the workers and the calling thread, and returns when fn(closure, i) has returned for
 * every i. A NULL pool runs everything on the calling thread. The signature matches <m>_parallel_for_fn,
 * so it can be stored in a context without a cast. */
void kiln_pthread_parallel_for(void* user, int64_t n, void (*fn)(void*, int64_t), void* closure);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PARALLEL_PTHREAD_H_ */
