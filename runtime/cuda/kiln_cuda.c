#include "kiln_cuda.h"

#include <cuda.h>

/* The table of buffer addresses, as the kernels read it from the arena; `io` null before a run. */
static void fill_table(const kiln_cuda_model* m, const kiln_cuda_handles* h, const unsigned long long* io,
                       unsigned long long* table) {
  for (int i = 0; i < m->num_buffers; ++i) {
    const kiln_cuda_buffer* b = &m->buffers[i];
    table[i] = b->kind == KILN_CUDA_ARENA ? h->arena + b->arena_offset : (io ? io[b->io_index] : 0);
  }
}

int kiln_cuda_init(const kiln_cuda_model* m, kiln_cuda_handles* h) {
  CUmodule module;
  CUresult rc = cuModuleLoadData(&module, m->cubin);
  if (rc != CUDA_SUCCESS) return (int)rc;
  h->module = module;
  for (int k = 0; k < m->num_kernels; ++k) {
    CUfunction f;
    rc = cuModuleGetFunction(&f, module, m->kernels[k].name);
    if (rc != CUDA_SUCCESS) return (int)rc;
    h->functions[k] = f;
  }
  /* On the model's stream, then waited for: a copy from pageable memory may return before its DMA
   * ends, and the caller's stream need not synchronize with the legacy default stream. */
  CUstream stream = (CUstream)h->stream;
  for (int w = 0; w < m->num_weights; ++w) {
    const kiln_cuda_weight* wt = &m->weights[w];
    rc = cuMemcpyHtoDAsync(h->arena + wt->arena_offset, m->weight_blob + wt->blob_offset, (size_t)wt->bytes, stream);
    if (rc != CUDA_SUCCESS) return (int)rc;
  }
  fill_table(m, h, 0, h->table);
  rc = cuMemcpyHtoDAsync(h->arena, h->table, sizeof(unsigned long long) * (size_t)m->num_buffers, stream);
  if (rc != CUDA_SUCCESS) return (int)rc;
  return (int)cuStreamSynchronize(stream);
}

int kiln_cuda_run(const kiln_cuda_model* m, kiln_cuda_handles* h, const unsigned long long* io) {
  CUstream stream = (CUstream)h->stream;
  /* The table is copied again only when the inputs or outputs moved: the copy waits for the stream. */
  int changed = 0;
  for (int i = 0; i < m->num_buffers; ++i) {
    const kiln_cuda_buffer* b = &m->buffers[i];
    if (b->kind != KILN_CUDA_ARENA && h->table[i] != io[b->io_index]) changed = 1;
  }
  if (changed) {
    fill_table(m, h, io, h->table);
    CUresult rc = cuMemcpyHtoDAsync(h->arena, h->table, sizeof(unsigned long long) * (size_t)m->num_buffers, stream);
    if (rc != CUDA_SUCCESS) return (int)rc;
  }
  CUdeviceptr table = h->arena;
  void* args[] = {&table};
  for (int k = 0; k < m->num_kernels; ++k) {
    const kiln_cuda_kernel* kn = &m->kernels[k];
    CUresult rc = cuLaunchKernel((CUfunction)h->functions[k], kn->grid, 1, 1, kn->block, 1, 1, 0, stream, args, 0);
    if (rc != CUDA_SUCCESS) return (int)rc;
  }
  return 0;
}

int kiln_cuda_release(kiln_cuda_handles* h) {
  if (!h->module) return 0;
  CUresult rc = cuModuleUnload((CUmodule)h->module);
  h->module = 0;
  return (int)rc;
}
