/* cross_core_read: how fast one core reads what the other core just wrote, against reading its own
 * writes: the price of a parallel loop whose halves read what the other thread made in the loop before.
 *
 * On a shared virtual machine this price is not fixed: the host places the two virtual CPUs on
 * physical cores that share a cache or not, and moves them. Run it beside a 2-thread benchmark to know
 * which case that benchmark ran in (bench/RESULTS.md, "Two threads on this host").
 *
 * Each of REPEAT turns, CPU 0 writes KB kilobytes, then one line of every 64 bytes is read (by CPU 0
 * itself, or by a thread pinned to CPU 1); prints the mean time per read and the bytes per second.
 * Build: cc -O2 -pthread cross_core_read.c -o cross_core_read; run: cross_core_read [KB] [REPEAT]. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static float* buffer;
static long floats;
static int repeat;
static atomic_int turn; /* 1: the reader's turn, 0: the writer's */
static double read_seconds;
static volatile float sink;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void write_all(int r) {
  for (long i = 0; i < floats; ++i) buffer[i] = (float)(i + r);
}

/* One load per 64-byte line, timed. */
static void read_all(void) {
  const double t = now();
  float s = 0;
  for (long i = 0; i < floats; i += 16) s += buffer[i];
  read_seconds += now() - t;
  sink = s;
}

static void* reader(void* unused) {
  (void)unused;
  if (pin(1) != 0) {
    fprintf(stderr, "cross_core_read: cannot run on CPU 1\n");
    exit(2);
  }
  for (int r = 0; r < repeat; ++r) {
    while (atomic_load(&turn) != 1) {
    }
    read_all();
    atomic_store(&turn, 0);
  }
  return NULL;
}

static void report(const char* who) {
  const double per_read = read_seconds / repeat;
  printf("%s: %.1f us per read, %.1f GB/s\n", who, per_read * 1e6, (double)floats * 4 / per_read / 1e9);
}

int main(int argc, char** argv) {
  const long kb = argc > 1 ? atol(argv[1]) : 512;
  repeat = argc > 2 ? atoi(argv[2]) : 200;
  if (kb <= 0 || repeat <= 0) {
    fprintf(stderr, "usage: %s [KB > 0] [REPEAT > 0]\n", argv[0]);
    return 2;
  }
  floats = kb * 256;
  buffer = aligned_alloc(64, (size_t)floats * 4);
  if (!buffer || pin(0) != 0) {
    fprintf(stderr, "cross_core_read: no memory, or cannot run on CPU 0\n");
    return 2;
  }
  printf("%ld KB written by CPU 0, one load per line\n", kb);
  for (int r = 0; r < repeat; ++r) {
    write_all(r);
    read_all();
  }
  report("read by CPU 0 (its own writes)");
  read_seconds = 0;
  pthread_t other;
  pthread_create(&other, NULL, reader, NULL);
  for (int r = 0; r < repeat; ++r) {
    write_all(r);
    atomic_store(&turn, 1);
    while (atomic_load(&turn) != 0) {
    }
  }
  pthread_join(other, NULL);
  report("read by CPU 1 (the other core's writes)");
  return 0;
}
