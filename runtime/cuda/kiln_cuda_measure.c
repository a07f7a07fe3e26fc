/* Timing one tuning candidate on a GPU: what a CUDA candidate's shared object (backends/measure/
 * cuda_candidate.cc) runs when a device server or local runner loads it (runtime/rpc/run_module.cc).
 * The builder compiles this file into every candidate with the candidate's cubin and kernel table.
 *
 * The runner fills the inputs on the host, as for CPU candidates; here they are copied to the GPU once,
 * the kernels run once untimed (module loading, first touch), then each repeat times `number` runs of
 * all kernels between two CUDA events on one stream (number doubling until a repeat lasts
 * min_repeat_ms), and the outputs are copied back for the runner's wrong-answer check. Only the driver
 * API is used: the shared object links libcuda, found at run time where the driver is. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

typedef struct kiln_measure_kernel {
  const char* name;
  unsigned grid, block;
} kiln_measure_kernel;

enum { KILN_MEASURE_INPUT = 0, KILN_MEASURE_OUTPUT = 1, KILN_MEASURE_TEMP = 2 };
enum { KILN_MEASURE_MAX_NUMBER = 1 << 20 };

static int kiln_measure_failed(CUresult rc, const char* call, char* err, int errlen) {
  const char* name = 0;
  cuGetErrorName(rc, &name);
  snprintf(err, (size_t)errlen, "%s failed: %s (%d)", call, name ? name : "?", (int)rc);
  return (int)rc ? (int)rc : 1;
}

#define KILN_MEASURE_CHECK(call)                                            \
  do {                                                                      \
    CUresult rc_ = (call);                                                  \
    if (rc_ != CUDA_SUCCESS) {                                              \
      status = kiln_measure_failed(rc_, #call, err, errlen);                \
      goto done;                                                            \
    }                                                                       \
  } while (0)

static CUresult kiln_measure_launch(const kiln_measure_kernel* kernels, CUfunction* functions, int num_kernels,
                                    CUdeviceptr table, CUstream stream) {
  void* args[] = {&table};
  for (int k = 0; k < num_kernels; ++k) {
    CUresult rc = cuLaunchKernel(functions[k], kernels[k].grid, 1, 1, kernels[k].block, 1, 1, 0, stream, args, 0);
    if (rc != CUDA_SUCCESS) return rc;
  }
  return CUDA_SUCCESS;
}

/* 0 and costs[0..*ncosts) in seconds per run, or nonzero with a message in err. `host[i]` holds
 * bytes[i] bytes; roles[i] is KILN_MEASURE_INPUT/OUTPUT/TEMP; costs has room for repeat entries. */
static int kiln_cuda_measure(const unsigned char* cubin, const kiln_measure_kernel* kernels, int num_kernels,
                             void** host, const unsigned long long* bytes, const unsigned char* roles, int n,
                             unsigned number, unsigned repeat, unsigned min_repeat_ms, double slow_call_s,
                             double* costs, int* ncosts, char* err, int errlen) {
  int status = 0;
  CUdevice device;
  CUcontext context = 0;
  CUmodule module = 0;
  CUstream stream = 0;
  CUevent start = 0, stop = 0;
  CUfunction functions[64];
  CUdeviceptr dev[256];
  CUdeviceptr table = 0;
  int allocated = 0, count = 0;
  float ms = 0;
  *ncosts = 0;
  if (num_kernels > 64 || n > 256) {
    snprintf(err, (size_t)errlen, "candidate has %d kernels and %d buffers (at most 64 and 256)", num_kernels, n);
    return 1;
  }
  KILN_MEASURE_CHECK(cuInit(0));
  KILN_MEASURE_CHECK(cuDeviceGetCount(&count));
  if (count == 0) {
    snprintf(err, (size_t)errlen, "no CUDA device");
    return 1;
  }
  KILN_MEASURE_CHECK(cuDeviceGet(&device, 0));
  KILN_MEASURE_CHECK(cuDevicePrimaryCtxRetain(&context, device));
  KILN_MEASURE_CHECK(cuCtxSetCurrent(context));
  KILN_MEASURE_CHECK(cuModuleLoadData(&module, cubin));
  for (int k = 0; k < num_kernels; ++k) KILN_MEASURE_CHECK(cuModuleGetFunction(&functions[k], module, kernels[k].name));
  for (; allocated < n; ++allocated) {
    const size_t size = bytes[allocated] ? (size_t)bytes[allocated] : 1;
    KILN_MEASURE_CHECK(cuMemAlloc(&dev[allocated], size));
    if (roles[allocated] == KILN_MEASURE_INPUT) KILN_MEASURE_CHECK(cuMemcpyHtoD(dev[allocated], host[allocated], size));
    else KILN_MEASURE_CHECK(cuMemsetD8(dev[allocated], 0, size));
  }
  KILN_MEASURE_CHECK(cuMemAlloc(&table, sizeof(CUdeviceptr) * (size_t)(n ? n : 1)));
  if (n) KILN_MEASURE_CHECK(cuMemcpyHtoD(table, dev, sizeof(CUdeviceptr) * (size_t)n));
  KILN_MEASURE_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  KILN_MEASURE_CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  KILN_MEASURE_CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  /* Untimed by the repeats: its time decides whether the candidate is worth them. */
  KILN_MEASURE_CHECK(cuEventRecord(start, stream));
  KILN_MEASURE_CHECK(kiln_measure_launch(kernels, functions, num_kernels, table, stream));
  KILN_MEASURE_CHECK(cuEventRecord(stop, stream));
  KILN_MEASURE_CHECK(cuEventSynchronize(stop));
  KILN_MEASURE_CHECK(cuEventElapsedTime(&ms, start, stop));
  if (slow_call_s > 0 && ms * 1e-3 > slow_call_s) {
    costs[(*ncosts)++] = ms * 1e-3;
  } else {
    unsigned long long runs = number ? number : 1;
    const double target = min_repeat_ms / 1000.0;
    for (unsigned r = 0; r < repeat; ++r) {
      for (;;) {
        KILN_MEASURE_CHECK(cuEventRecord(start, stream));
        for (unsigned long long i = 0; i < runs; ++i)
          KILN_MEASURE_CHECK(kiln_measure_launch(kernels, functions, num_kernels, table, stream));
        KILN_MEASURE_CHECK(cuEventRecord(stop, stream));
        KILN_MEASURE_CHECK(cuEventSynchronize(stop));
        KILN_MEASURE_CHECK(cuEventElapsedTime(&ms, start, stop));
        const double elapsed = ms * 1e-3;
        if (elapsed >= target || runs >= KILN_MEASURE_MAX_NUMBER) {
          costs[(*ncosts)++] = elapsed / (double)runs;
          break;
        }
        unsigned long long next = elapsed > 0 ? (unsigned long long)(runs * target / elapsed * 1.2) + 1 : runs * 2;
        runs = next > runs * 2 ? next : runs * 2;
        if (runs > KILN_MEASURE_MAX_NUMBER) runs = KILN_MEASURE_MAX_NUMBER;
      }
    }
  }
  for (int i = 0; i < n; ++i)
    if (roles[i] == KILN_MEASURE_OUTPUT && bytes[i]) KILN_MEASURE_CHECK(cuMemcpyDtoH(host[i], dev[i], (size_t)bytes[i]));
done:
  if (start) cuEventDestroy(start);
  if (stop) cuEventDestroy(stop);
  if (stream) cuStreamDestroy(stream);
  if (table) cuMemFree(table);
  for (int i = 0; i < allocated; ++i) cuMemFree(dev[i]);
  if (module) cuModuleUnload(module);
  if (context) cuDevicePrimaryCtxRelease(device);
  return status;
}
