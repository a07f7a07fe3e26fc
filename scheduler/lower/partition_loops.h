/// \file Loops split where a select's bound test changes value (TVM's loop partition, for constant
/// bounds): a zero-padded copy, select(0 <= i - 1 && i - 1 < 56, x[i - 1], 0), becomes a loop of
/// zeros, a loop of plain copies and a loop of zeros, with no test left per element.
///
/// Why: a searched program computes a convolution's or pool's padded input as a stage of its own, and
/// lowered as written every element pays a vector compare and blend for both its row and its column.
/// A depthwise conv's searched programs spent more time padding than convolving (0.13 ms against the
/// default schedule's 0.06, which pads plane by plane without tests: padded_planes.h).
///
/// A test is split on when it compares an integer affine in the loop's variable alone with a constant
/// (other loops' variables in it would make the split points run-time values). A loop is split into at
/// most three parts, and a test constant over a part is replaced by its value there, so a select or an
/// `if` on it folds away.
#pragma once
#include "scheduler/lower/loop_ir.h"

namespace kiln::lower {

Stmt partition_guarded_loops(const Stmt& s);

}  // namespace kiln::lower
