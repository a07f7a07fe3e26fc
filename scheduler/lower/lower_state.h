/// \file From a loop State to loop IR: the one path every scheduled program takes to codegen (and to
/// the tuner's feature extraction). Any state that its steps accepted lowers, and computes what the
/// DAG computes: bound inference sizes stages computed inside loops, non-divisible splits are guarded,
/// inlined stages are substituted into their readers, annotations become loop kinds.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "scheduler/lower/loop_ir.h"
#include "scheduler/state/state.h"

namespace kiln::lower {

/// Lowers `s`. `buffers` holds the buffer of every placeholder and of every DAG output. A stage at root
/// that is not an output gets a new global buffer appended to `temporaries` (workspace the caller
/// places), as does an extern call's scratch; a stage computed at a loop gets a local buffer there.
/// Throws state::ScheduleError for a state that cannot lower (an unchosen split length).
Stmt lower_state(const state::State& s, const std::map<const te::TensorNode*, BufferRef>& buffers,
                 std::vector<BufferRef>& temporaries);

/// The state as a standalone function: parameters are the DAG's placeholders, its outputs, then the
/// temporaries (tests and measurement use this). Constants whose layout the state rewrites
/// (constant_layout.h) are temporaries too; with `fill_rewritten_constants` the function fills them
/// from the placeholders on its first call, which a flag buffer (the last parameter, zero before that
/// call) records, so a runner's untimed first call pays for it. Feature extraction leaves that out.
LoweredFunc lower_state_func(const state::State& s, const std::string& name, bool fill_rewritten_constants = true);

/// Appends to f's parameters a buffer for each placeholder of `dag`, then for each distinct output:
/// the order measured candidates' runners expect (measure::buffer_specs). Returns the buffers by tensor.
std::map<const te::TensorNode*, BufferRef> add_io_params(const te::ComputeDAG& dag, LoweredFunc& f);

}  // namespace kiln::lower
