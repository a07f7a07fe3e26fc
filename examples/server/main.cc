// Server-style use of a kiln package (tiny_cnn): one thread pool plugged into the context's
// parallel_for, and several model instances running concurrently from their own threads. Each
// instance owns its workspace and output buffer (the library keeps no state of its own, so that is all
// reentrancy needs); they share the pool, the code and the weights. The run checks that every instance,
// on every iteration, produces exactly the outputs of a serial run (NULL context).
//
//   server [instances=4] [threads=4] [iterations=50]
//
// Build with CMake (examples/server/CMakeLists.txt: find_package on the package directory), or by hand:
//   c++ -std=c++20 -O2 -IPKG main.cc PKG/libtiny_cnn.a PKG/kiln_parallel_pthread.o -pthread -lm
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kiln_parallel_pthread.h"
#include "tiny_cnn.h"

namespace {

constexpr size_t kInputCount = TINY_CNN_INPUT_IMAGE_SIZE / sizeof(float);
constexpr size_t kClassCount = TINY_CNN_OUTPUT_PROBABILITIES_SIZE / sizeof(float);

// The workspace must be TINY_CNN_WORKSPACE_ALIGN-aligned; std::aligned_alloc also wants the size to be
// a multiple of the alignment (and non-zero).
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
std::unique_ptr<void, FreeDeleter> alloc_workspace() {
  size_t a = TINY_CNN_WORKSPACE_ALIGN;
  size_t bytes = (TINY_CNN_WORKSPACE_SIZE + a - 1) / a * a;
  return std::unique_ptr<void, FreeDeleter>(std::aligned_alloc(a, bytes ? bytes : a));
}

// Counts the parallel regions the model opens, to show the pool is actually used.
struct CountingPool {
  kiln_pthread_pool* pool;
  std::atomic<long> regions{0};
};
void counting_parallel_for(void* user, int64_t n, tiny_cnn_task_fn fn, void* closure) {
  auto* c = static_cast<CountingPool*>(user);
  c->regions.fetch_add(1, std::memory_order_relaxed);
  kiln_pthread_parallel_for(c->pool, n, fn, closure);
}

}  // namespace

int main(int argc, char** argv) {
  const int instances = argc > 1 ? std::atoi(argv[1]) : 4;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 4;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 50;
  if (instances < 1 || threads < 1 || iterations < 1) {
    std::fprintf(stderr, "usage: server [instances>=1] [threads>=1] [iterations>=1]\n");
    return 2;
  }

  // One fixed input (a smooth ramp, the same on every machine), shared read-only by all instances.
  std::vector<float> image(kInputCount);
  for (size_t i = 0; i < kInputCount; ++i) image[i] = static_cast<float>(static_cast<int>(i % 61) - 30) / 32.0f;
  tiny_cnn_inputs in{image.data()};

  // The expected outputs: a serial run, NULL context.
  std::vector<float> expected(kClassCount);
  {
    auto ws = alloc_workspace();
    tiny_cnn_outputs out{expected.data()};
    if (int rc = tiny_cnn_run(nullptr, &in, &out, ws.get()); rc != TINY_CNN_OK) {
      std::fprintf(stderr, "serial run failed: %d\n", rc);
      return 1;
    }
  }

  CountingPool pool{kiln_pthread_pool_create(threads)};
  if (!pool.pool) {
    std::fprintf(stderr, "cannot start a pool of %d threads\n", threads);
    return 1;
  }
  const tiny_cnn_context ctx{counting_parallel_for, &pool};

  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int k = 0; k < instances; ++k) {
    workers.emplace_back([&] {
      // This instance's own state: a workspace and an output buffer.
      auto ws = alloc_workspace();
      std::vector<float> probabilities(kClassCount);
      tiny_cnn_outputs out{probabilities.data()};
      for (int it = 0; it < iterations; ++it) {
        std::fill(probabilities.begin(), probabilities.end(), -1.0f);
        int rc = tiny_cnn_run(&ctx, &in, &out, ws.get());
        // Bitwise: the parallel schedule splits independent iterations, so nothing may differ.
        if (rc != TINY_CNN_OK || std::memcmp(probabilities.data(), expected.data(), TINY_CNN_OUTPUT_PROBABILITIES_SIZE) != 0)
          failures.fetch_add(1);
      }
    });
  }
  for (auto& t : workers) t.join();
  kiln_pthread_pool_destroy(pool.pool);

  size_t top = 0;
  for (size_t k = 1; k < kClassCount; ++k)
    if (expected[k] > expected[top]) top = k;
  const long runs = static_cast<long>(instances) * iterations;
  if (failures.load() != 0) {
    std::printf("server: FAILED: %d of %ld runs differ from the serial run\n", failures.load(), runs);
    return 1;
  }
  // tiny_cnn's stages are all below the default schedule's parallel threshold (4096 elements), so it
  // opens no parallel regions; bigger models go through the pool the same way.
  std::printf("server: %d instances x %d runs on %d threads (%ld parallel regions): all %ld outputs identical to the serial run; top class %zu (p=%.6f)\n",
              instances, iterations, threads, pool.regions.load(), runs, top, static_cast<double>(expected[top]));
  return 0;
}
