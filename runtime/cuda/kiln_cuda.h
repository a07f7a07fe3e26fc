/* The launch helper of kiln's CUDA packages: loads a package's kernels (an embedded cubin) into the
 * current CUDA context, uploads its weights into the caller's device arena once, and launches the
 * kernels in order on the caller's stream. Compiled into every CUDA package (lib<m>.a); it calls the
 * CUDA driver API only, so the package links with -lcuda and needs no CUDA runtime library, and it
 * allocates nothing: the device arena belongs to the caller.
 *
 * Arena layout: the table of buffer addresses the kernels read (at offset 0), then the weights and the
 * intermediates at the offsets the model's tables give. */
#ifndef KILN_CUDA_H
#define KILN_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_cuda_kernel {
  const char* name;
  unsigned grid, block; /* blocks and threads per block, along x */
} kiln_cuda_kernel;

enum { KILN_CUDA_INPUT = 0, KILN_CUDA_OUTPUT = 1, KILN_CUDA_ARENA = 2 };

/* One kernel parameter: an input or output (by index into the run's address list, inputs first) or
 * a place in the arena (a weight or an intermediate). */
typedef struct kiln_cuda_buffer {
  int kind;
  int io_index;
  unsigned long long arena_offset;
} kiln_cuda_buffer;

/* One weight: `bytes` bytes at `blob_offset` of the weight blob go to `arena_offset`. */
typedef struct kiln_cuda_weight {
  unsigned long long arena_offset, blob_offset, bytes;
} kiln_cuda_weight;

typedef struct kiln_cuda_model {
  const unsigned char* cubin;
  const kiln_cuda_kernel* kernels;
  int num_kernels;
  const kiln_cuda_buffer* buffers;
  int num_buffers;
  const kiln_cuda_weight* weights;
  int num_weights;
  const unsigned char* weight_blob;
} kiln_cuda_model;

/* What a loaded model holds; the arrays are sized by the model (num_kernels, num_buffers). */
typedef struct kiln_cuda_handles {
  void* module;                /* CUmodule */
  void* stream;                /* CUstream, the caller's (0: the default stream) */
  unsigned long long arena;    /* CUdeviceptr, the caller's */
  void** functions;            /* CUfunction per kernel */
  unsigned long long* table;   /* the buffer addresses last copied to the arena */
} kiln_cuda_handles;

/* 0, or the CUresult of the driver call that failed. */
int kiln_cuda_init(const kiln_cuda_model* m, kiln_cuda_handles* h);
int kiln_cuda_run(const kiln_cuda_model* m, kiln_cuda_handles* h, const unsigned long long* io);
int kiln_cuda_release(kiln_cuda_handles* h);

#ifdef __cplusplus
}
#endif
#endif
