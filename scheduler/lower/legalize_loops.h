/// \file Loop kinds a schedule asks for but the target cannot honour where they ended up: a parallel
/// loop inside another parallel or vector loop runs serially, and a vectorized loop whose body holds
/// loops, allocations or runtime calls runs as a scalar loop (TVM's vectorizer falls back likewise).
/// Annotations stay hints; the program stays correct.
#pragma once
#include "scheduler/lower/loop_ir.h"

namespace kiln::lower {

Stmt legalize_loop_kinds(const Stmt& s);

/// Whether `s` can be the body of a vectorized loop: stores, blocks and conditions only.
bool is_vectorizable_body(const Stmt& s);

}  // namespace kiln::lower
