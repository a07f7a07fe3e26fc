/// \file The GPU schedule of reductions with few outputs: several threads per output (Ansor's
/// cross-thread reduction rule).
///
/// Why: with one thread per output, LayerNorm's mean over 768 values in BERT-base at batch 1 is 128
/// threads, one block on one of 132 multiprocessors, each thread walking its own row alone, and no
/// two threads of a warp reading the same cache line. Here W lanes (a power of two, 32 to 256) share
/// each output: lane l combines the terms l, l + W, l + 2W, ... (consecutive lanes read consecutive
/// terms), the W partial results meet in shared memory and are combined pairwise in log2(W) steps,
/// each a thread loop after a barrier (exact when the threads run one after another), and lane 0
/// stores the result, with the reduction's epilogue applied.
///
///     blockIdx.x for b:                                    # threads / W outputs per block
///       allocate shared part[threads]
///       threadIdx.x for t: part[t] = the partial of lane t % W for output b * threads / W + t / W
///       barrier
///       threadIdx.x for t: if t % W < W / 2: part[t] = part[t] (+) part[t + W / 2]
///       barrier ... down to 1
///       threadIdx.x for t: if t % W == 0: out[output] = epilogue(part[t])
///
/// Matmuls and convolutions are left to the shared-memory tiles and register tiles: their terms are
/// not contiguous along the reduction, and they have other reuse to exploit.
#pragma once
#include <map>

#include "scheduler/lower/lower_gpu.h"

namespace kiln::lower {

/// Lanes per output for stage `s` under `p`, or 0 where one thread per output is the schedule: not a
/// reduction, a matmul or conv, fewer than 64 terms, or outputs enough for a quarter of p.min_threads.
/// W grows from 32 until each lane combines at most 64 terms, up to 256.
int64_t cross_thread_lanes(const te::Stage& s, const GpuScheduleParams& p);

/// The stage of `t` as one kernel with `lanes` threads per output (a power of two from 2 to the
/// block's threads), with `epilogue`.
Stmt lower_stage_gpu_cross_thread(const te::TensorRef& t, int64_t lanes, const std::map<const te::TensorNode*, BufferRef>& buffers,
                                  const GpuScheduleParams& p, const Epilogue* epilogue);

}  // namespace kiln::lower
