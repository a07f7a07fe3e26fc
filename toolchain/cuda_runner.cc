#include "toolchain/cuda_runner.h"

#include <fmt/format.h>

#include "backends/package/c_names.h"

namespace kiln {

std::string cuda_runner_source(const PackageSignature& sig) {
  const std::string& m = sig.name;
  const std::string M = package::c_macro_prefix(m);
  const size_t ni = sig.inputs.size(), no = sig.outputs.size();
  const std::string sizes = io_sizes_array(sig, "size_t");
  std::string fill;
  for (size_t i = 0; i < ni; ++i) fill += fmt::format("  in.{} = dev[{}];\n", sig.inputs[i].c_name, i);
  for (size_t i = 0; i < no; ++i) fill += fmt::format("  out.{} = dev[{}];\n", sig.outputs[i].c_name, ni + i);
  return fmt::format(R"(#include "{m}.h"
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
{sizes}
#define CHECK(call) do {{ CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) {{ \
  const char* s_ = 0; cuGetErrorName(rc_, &s_); \
  fprintf(stderr, "%s failed: %s (%d)\n", #call, s_ ? s_ : "?", (int)rc_); return 3; }} }} while (0)
static int cmp(const void* a, const void* b) {{
  float x = *(const float*)a, y = *(const float*)b;
  return x < y ? -1 : x > y;
}}
int main(int argc, char** argv) {{
  enum {{ NI = {ni}, NO = {no} }};
  if (argc != 2 + NI + NO) {{ fprintf(stderr, "usage: runner REPEAT inputs... outputs...\n"); return 2; }}
  int repeat = atoi(argv[1]);
  CUdevice device;
  CUcontext context;
  CUstream stream;
  CHECK(cuInit(0));
  int count = 0;
  CHECK(cuDeviceGetCount(&count));
  if (count == 0) {{ fprintf(stderr, "no CUDA device\n"); return 3; }}
  CHECK(cuDeviceGet(&device, 0));
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dev[NI + NO + 1];
  void* host[NI + NO + 1];
  for (int i = 0; i < NI + NO; ++i) {{
    host[i] = malloc(sizes[i] ? sizes[i] : 1);
    CHECK(cuMemAlloc(&dev[i], sizes[i] ? sizes[i] : 1));
    if (i < NI) {{
      FILE* f = fopen(argv[2 + i], "rb");
      if (!f || fread(host[i], 1, sizes[i], f) != sizes[i]) {{ fprintf(stderr, "cannot read %s\n", argv[2 + i]); return 2; }}
      fclose(f);
      CHECK(cuMemcpyHtoD(dev[i], host[i], sizes[i] ? sizes[i] : 1));
    }}
  }}
  /* The copies above ran on the legacy default stream, which the model's non-blocking stream does not
   * wait for. */
  CHECK(cuCtxSynchronize());
  CUdeviceptr arena;
  CHECK(cuMemAlloc(&arena, {M}_DEVICE_ARENA_SIZE));
  {m}_context ctx;
  {m}_inputs in;
  {m}_outputs out;
{fill}  CHECK((CUresult){m}_init(&ctx, stream, arena));
  CUevent start, stop;
  CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  float* times = malloc(sizeof(float) * (size_t)(repeat > 0 ? repeat : 1));
  /* One untimed run first: module loading and first-touch costs stay out of the times. */
  for (int r = repeat > 0 ? -1 : 0; r < repeat; ++r) {{
    CHECK(cuEventRecord(start, stream));
    CHECK((CUresult){m}_run(&ctx, &in, &out));
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    if (r >= 0) CHECK(cuEventElapsedTime(&times[r], start, stop));
  }}
  CHECK(cuStreamSynchronize(stream));
  qsort(times, (size_t)repeat, sizeof(float), cmp);
  printf("median: %.6f ms\nmin: %.6f ms\n", repeat > 0 ? times[repeat / 2] : 0.0, repeat > 0 ? times[0] : 0.0);
  for (int i = 0; i < NO; ++i) {{
    CHECK(cuMemcpyDtoH(host[NI + i], dev[NI + i], sizes[NI + i] ? sizes[NI + i] : 1));
    FILE* f = fopen(argv[2 + NI + i], "wb");
    if (!f || fwrite(host[NI + i], 1, sizes[NI + i], f) != sizes[NI + i]) {{ fprintf(stderr, "cannot write\n"); return 2; }}
    fclose(f);
  }}
  CHECK((CUresult){m}_release(&ctx));
  return 0;
}}
)",
                     fmt::arg("m", m), fmt::arg("M", M), fmt::arg("sizes", sizes), fmt::arg("ni", ni), fmt::arg("no", no),
                     fmt::arg("fill", fill));
}

}  // namespace kiln
