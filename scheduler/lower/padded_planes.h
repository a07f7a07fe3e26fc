/// \file A zero-padded input padded plane by plane inside its reader's loop nest, in the default schedule.
///
/// A padded convolution or pool reads a padded copy of its input (nn_conv_lowering.cc's `pad` stage).
/// As a pass of its own that copy is written to memory and read back: a 56x56 depthwise conv's
/// 128 x 58 x 58 floats (1.7 MB) leave a 1 MB L2, and the copy took 30 of the layer's 91 us
/// (bench/RESULTS.md, issue 17 step 16). A depthwise convolution or a pool reads channel c's plane only
/// for channel c's outputs, so the default schedule pads that plane at the top of the channel loop, into
/// a local buffer that stays in L1 while the reader's taps read it. Dense convolutions read every input
/// channel for every output: no plane of theirs belongs to one iteration of an outer loop, so they keep
/// the copy (a small share of their time). Tuned programs keep the pad stage and may compute it at any
/// loop the search picks.
#pragma once
#include <map>
#include <set>

#include "scheduler/lower/lower_dag.h"

namespace kiln::lower {

/// A pad stage computed inside its one reader's loop nest: along the reader's first `depth` axes the
/// reader reads it only at its own position, so one iteration of those loops needs only the plane of
/// the pad stage's remaining axes.
struct PaddedPlane {
  size_t pad_stage = 0;  // position in dag.tensors
  size_t depth = 0;
};
struct PaddedPlanePlan {
  std::map<size_t, PaddedPlane> by_reader;  // reader's position in dag.tensors -> its plane
  std::set<const te::TensorNode*> planes;   // the pad stages: no buffer and no loop nest of their own
};

/// The pad stages (tag "pad", not a DAG output) whose one reader is a reduction that reads them at its
/// own position along its first `depth` axes, with `depth` the fewest such axes for which the plane
/// left fits params.local_plane_bytes. Also required, so that the default schedule's parallel loop is
/// one of those axes and each thread pads its own planes: one of them has 4 or more iterations, none is
/// a register tile's operand axis, and `depth` leaves the reader its two innermost axes.
PaddedPlanePlan plan_padded_planes(const te::ComputeDAG& dag, const ScheduleParams& params);

/// The reader's default loop nest (lower_stage_default) reading its plane from a local buffer, which is
/// padded at the top of the body of the reader's loop over axis depth - 1.
Stmt lower_with_padded_plane(const te::ComputeDAG& dag, size_t reader, const PaddedPlane& plane,
                             const std::map<const te::TensorNode*, BufferRef>& buffers, const ScheduleParams& params,
                             const Epilogue* epilogue);

}  // namespace kiln::lower
