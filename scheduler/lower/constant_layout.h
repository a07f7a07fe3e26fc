/// \file Layout rewrite of constants: a weight stored in the order its reader's loops walk it
/// (state/steps/layout_rewrite_step.h says why).
///
/// The layout is read off the lowered program, not the schedule: every load of the weight must index
/// it affinely in the loops around it, the same way at every load. The rewritten weight has one
/// dimension per loop its index moves with, in nesting order (outermost first), each as long as its
/// loop, so the innermost loops walk it contiguously: a matmul's panel of k x 32 columns is one run
/// of memory, not k rows a tensor row apart. A weight read some other way (through a computed
/// index, or differently by two loads) keeps its layout, as does one the rewrite would leave in place or
/// grow past kMaxRelayoutGrowth (tiles that overshoot a dimension leave zero padding).
///
/// The values are filled once: by `kiln compile` from the weight's bytes (relayout_constant), and in a
/// measured candidate, whose weights arrive in their own layout, by a nest that runs before the
/// program (relayout_nest).
#pragma once
#include <map>
#include <vector>

#include "frontend/ir/tensor.h"
#include "scheduler/lower/loop_ir.h"
#include "scheduler/te/compute.h"

namespace kiln::lower {

/// The rewritten weight may be at most this many times the size of the original.
inline constexpr int64_t kMaxRelayoutGrowth = 2;

/// `s` with each buffer of `sources` that can be rewritten read from a new buffer (its `relayout`
/// set), appended to `temporaries`.
Stmt rewrite_constant_layouts(const Stmt& s, const std::vector<BufferRef>& sources, std::vector<BufferRef>& temporaries);

/// The values of a rewritten constant, from the source's.
Tensor relayout_constant(const Tensor& source, const ConstantLayout& layout);

/// A loop nest that fills `b` (a buffer with `relayout`) from its source buffer.
Stmt relayout_nest(const BufferRef& b);

/// Makes `f` fill its rewritten constants (the parameters with `relayout`) from their sources on its
/// first call, which a runner leaves untimed: a flag buffer, zero before that call, records it (a new
/// last parameter). For functions measured or tested on their own; a package's are filled by
/// `kiln compile`.
void fill_on_first_call(LoweredFunc& f);

/// `s` with the weights that `dag`'s reductions other than convolutions read (te::reduction_weights;
/// their buffers in `buffers`) rewritten as rewrite_constant_layouts does: the default schedule's
/// matmul tiles read their weights panel by panel too.
Stmt rewrite_weight_layouts(const Stmt& s, const te::ComputeDAG& dag, const std::map<const te::TensorNode*, BufferRef>& buffers,
                            std::vector<BufferRef>& temporaries);

}  // namespace kiln::lower
