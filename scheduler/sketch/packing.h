/// \file Per-tile packing: the right-hand operand of a register tile copied, block by block, into a
/// contiguous buffer computed inside the tiled stage's reduction loops (a cache-read in scope "pack",
/// placed by the compute-location rules, which for such a stage also offer the reduction loops).
///
/// Why: a matmul's right-hand operand read in blocks of a few rows by one or two vectors touches rows
/// a whole tensor row apart, which fall into the same few cache sets. A constant weight gets the same
/// effect for free from the layout rewrite (steps/layout_rewrite_step.h); an operand computed at run
/// time (attention's K and V) can only be copied, and where the copy pays is a search choice.
#pragma once
#include "scheduler/state/state.h"

namespace kiln::sketch {

/// The scope of a packing cache-read stage.
inline constexpr const char* kPackScope = "pack";

/// The placeholder stage that stage `stage` reads as a register tile's right-hand operand: its last
/// index moves with the innermost spatial axis longer than 1 and none of its indices with the
/// `row_from_end`-th such axis before it (1: the one just outside). -1 if no placeholder reads so.
int right_hand_operand(const state::State& s, int stage, size_t row_from_end = 1);

/// Whether `stage` is a packing copy (scope kPackScope).
bool is_packing_stage(const state::State& s, int stage);

}  // namespace kiln::sketch
