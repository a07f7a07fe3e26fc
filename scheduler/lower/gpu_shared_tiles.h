/// \file The GPU schedule of matmuls and convolutions: block tiles staged through shared memory.
///
/// Why: with one thread per output (or per small register tile, lower_gpu.h) every operand element is
/// read from global memory once per output that uses it, and a 4096^3 matmul ran at 22% of the FMA
/// peak. This is Ansor's GPU multi-level tile with cache reads into shared memory: a block computes a
/// box of outputs; per chunk of the reduction its threads copy the operand boxes that chunk reads into
/// shared memory together (cooperative fetching), wait at a barrier, and each thread accumulates a
/// register tile of outputs from the shared copies; a second barrier guards the next chunk's copy.
///
/// The staged box of an operand follows from its indices, which must be affine in the stage's axes
/// with non-negative coefficients (matmul, dense, conv over a padded input): per dimension, the index
/// with the block's first output and the chunk's first step is the box's origin, and the spread of the
/// coefficients over the block and the chunk its extent. A stage whose operands are read any other way
/// (grouped convs, gathers) keeps the default GPU schedule.
///
/// The kernel (loop IR):
///
///     blockIdx.x for b:                                 # a block: its box of outputs
///       allocate shared A.s, B.s; allocate per-thread acc
///       threadIdx.x for t: acc = init                   # each thread: its register tile
///       for ko in chunks:
///         threadIdx.x for t: A.s, B.s = boxes of A, B    # cooperative fetching
///         barrier
///         threadIdx.x for t: acc += A.s * B.s            # the chunk's reduction, from shared memory
///         barrier
///       threadIdx.x for t: out = epilogue(acc)
///
/// With chunk prefetch (GpuSharedTile::prefetch, offered where there are two chunks or more and each
/// thread copies at most 16 elements of each box), chunk 0 is copied before the loop, and iteration ko
/// loads chunk ko + 1's elements into per-thread registers before its FMAs and stores them into shared
/// memory after the barrier that ends them: a warp's global loads are in flight while it computes,
/// instead of stalling the copy (the software pipelining of CUTLASS-style GEMMs, with one shared buffer).
///
/// Within a block, thread t's register tile along axis a is strided by the threads along a (output
/// i * threads_a + thread_a): consecutive threads then write consecutive outputs and read consecutive
/// shared elements (no bank conflicts).
#pragma once
#include <map>
#include <optional>
#include <vector>

#include "scheduler/lower/lower_gpu.h"

namespace kiln::lower {

/// The tile for stage `s` under `p`, or none where this schedule does not apply (not a matmul or conv,
/// a reduction shorter than 32, an operand read through an index that is not affine, nothing that
/// fits p's threads and shared memory, or no tile that shares enough). Among the tiles that keep at
/// least half the parallelism the best one keeps (threads per multiprocessor, multiprocessors busy),
/// it takes the one whose threads would run their FMAs fastest by a simple model: working lanes per
/// warp, register-tile reuse and shared-memory reuse (gpu_shared_tiles.cc).
std::optional<GpuSharedTile> choose_shared_tile(const te::Stage& s, const GpuScheduleParams& p);

/// A tile drawn at random (seeded by `seed` and the stage's name) from every tile that fits p's threads
/// and shared memory, with a random chunk, or none (the thread-per-output schedule, one choice among
/// them): the random GPU programs that check this lowering over its whole space.
std::optional<GpuSharedTile> random_shared_tile(const te::Stage& s, const GpuScheduleParams& p, uint64_t seed);

/// Every tile the stage can take within p's threads and p.tuned_shared_bytes, with every chunk that
/// fits, each without and (where it applies) with chunk prefetch: the space a tuner searches
/// (scheduler/search/gpu_tile_search.h). Empty where the shared-memory schedule does not apply.
std::vector<GpuSharedTile> shared_tile_space(const te::Stage& s, const GpuScheduleParams& p);

/// The stage of `t` as one kernel under `tile` (from choose_shared_tile, or any tile whose block and
/// thread tiles divide the axes and whose chunk divides the reduction's first axis; with prefetch, only
/// where the space offers it), with `epilogue`.
Stmt lower_stage_gpu_shared(const te::TensorRef& t, const GpuSharedTile& tile,
                            const std::map<const te::TensorNode*, BufferRef>& buffers, const Epilogue* epilogue);

}  // namespace kiln::lower
