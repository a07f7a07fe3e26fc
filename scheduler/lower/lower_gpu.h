/// \file The default GPU schedule: one thread per output element (per small register tile for reductions).
///
/// Why this first: it is correct for every stage a CPU schedule handles (each thread computes one
/// element exactly as the reference does, reductions serially in a register), it needs no shared
/// memory or barriers, and it gives every later GPU schedule (Ansor's multi-level tiling with shared
/// memory, issue 21) a working baseline to be measured and checked against. A stage becomes one kernel:
/// a GpuBlock loop around a GpuThread loop over the stage's flattened elements, guarded when the
/// thread count does not divide them. Reductions keep Ansor's epilogue fusion (plan_epilogues): the
/// elementwise chain after a reduction is applied to its accumulator before the one store.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/lower_model.h"
#include "scheduler/lower/loop_ir.h"

namespace kiln::lower {

/// A block's share of a reduction stage: per output axis, the block's extent and each thread's
/// register tile along it (block[a] / thread_tile[a] threads along a); the reduction's first axis is
/// staged `k_chunk` steps at a time (the others whole). gpu_shared_tiles.h lowers it.
struct GpuSharedTile {
  std::vector<int64_t> block, thread_tile;
  int64_t k_chunk = 1;
  bool prefetch = false;  ///< load the next chunk into registers during the current one's FMAs
  int64_t threads() const;
  bool operator==(const GpuSharedTile&) const = default;
};

/// Tuned choices for a subgraph's stages, by index in its DAG's tensors: a shared-memory tile, or
/// nullopt for the kernel without shared memory (one thread per output or register tile, or a
/// cross-thread reduction where that applies). Stages not listed follow the default rule.
using GpuStageTiles = std::map<size_t, std::optional<GpuSharedTile>>;

struct GpuScheduleParams {
  int threads_per_block = 256;  // a multiple of the warp; at most the target's threads_per_block
  /// Register tiles shrink until a stage has this many threads: 1024 per multiprocessor (half of what
  /// one holds), the H100's 132 by default.
  int64_t min_threads = 132 * 1024;
  int64_t multiprocessors = 132;
  /// Matmuls and convolutions as block tiles staged through shared memory (gpu_shared_tiles.h), each
  /// block's boxes within shared_bytes: a 128 x 128 tile's two 16-step boxes with their padding, well
  /// under a block's 48 KiB, so several blocks fit a multiprocessor.
  bool shared_tiles = true;
  int64_t shared_bytes = 20480;
  /// The default rule's tiles load their next chunk into registers while the current one computes
  /// (gpu_shared_tiles.h). Off by default until measured on a GPU: it raises a 128 x 128 tile's
  /// registers per thread from 128 to 177, so one block fits a multiprocessor instead of two. Tuned
  /// tiles choose it per stage.
  bool prefetch_chunks = false;
  /// Set: each matmul and convolution takes a random tile (random_shared_tile with this seed) instead.
  std::optional<uint64_t> random_tiles;
  /// Reductions with few outputs use several threads per output (gpu_cross_thread.h).
  bool cross_thread_reductions = true;
  /// The shared memory a tuned tile may take: a block's limit without opting in to more (the target's
  /// [gpu] shared_memory). The default rule keeps to shared_bytes, which leaves room for several blocks.
  int64_t tuned_shared_bytes = 49152;
  /// Tuned tiles of subgraph `id` (records, or a candidate being measured), or null: the rule above.
  std::function<const GpuStageTiles*(int subgraph_id)> tuned;
};

/// A local buffer of a kernel's block: GpuShared (one copy for its threads) or GpuPerThread (one copy
/// per thread of the block's `threads`).
BufferRef make_gpu_buffer(const std::string& name, DType dtype, int64_t size, BufferScope scope, int64_t threads);

/// `body`, a statement over the flat index `var` in 0..n, as a kernel: a GpuBlock loop of
/// ceil(n / threads) blocks around a GpuThread loop, `var` replaced by block * threads + thread and
/// the body guarded by `var < n` when threads does not divide n. A small n gets one block of n
/// threads rounded up to a warp.
Stmt over_gpu_threads(const Expr& var, int64_t n, const Stmt& body, const GpuScheduleParams& p);

/// One stage as a kernel: one thread per element, or for a reduction (matmul, conv) one thread per
/// register tile of up to 4 x 4 outputs along its operand-block (or second-
/// innermost) axis and its innermost axis (with `epilogue`, as lower_stage_default).
/// `tuned`, when given, replaces the default rule's choice for a matmul or convolution.
Stmt lower_stage_gpu(const te::TensorRef& stage_output, const std::map<const te::TensorNode*, BufferRef>& buffers,
                     const GpuScheduleParams& p, const Epilogue* epilogue = nullptr,
                     const std::optional<GpuSharedTile>* tuned = nullptr);

/// A subgraph under the default GPU schedule (the GPU counterpart of lower_subgraph_default). Extern
/// stages (runtime kernels: TopK, Det, ...) have no GPU kernel yet and raise Unsupported, naming the op.
SubgraphScheduler gpu_subgraph_scheduler(const GpuScheduleParams& p);

/// A lowered model's body as kernels only: statements that lower_model adds itself (the copies into
/// outputs no subgraph writes, plain loops over one flat index) become kernels through
/// over_gpu_threads; statements that are kernels already stay. Throws Error for anything else.
Stmt gpu_kernels_only(const Stmt& model_body, const GpuScheduleParams& p);

}  // namespace kiln::lower
