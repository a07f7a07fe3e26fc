/// \file FLOPs of a compute DAG, counted from its stages: the task scheduler's size of a task, and a
/// cross-check of the per-op formulas `kiln inspect` uses (docs/ops.md).
///
/// Per stage: output elements x reduction extent (the product of the reduce axes' extents, 1 for a
/// plain stage) x operations per body evaluation, where the operations are the arithmetic, math and
/// comparison nodes of the body on data (operand dtype other than the int64 index type and bool;
/// index expressions inside loads are addressing, not arithmetic), plus 1 for the reducer's combine.
/// So a convolution or matmul counts 2 per multiply-add, a ReLU (max) 1 per element, a bias add 1.
/// Loads, casts, selects and constants are free. Extern stages count 0 (their kernels are not
/// expressions). Every iteration point counts, including taps a guard turns into zero: padding taps
/// of a convolution (as the per-op formulas count them too), but also the (stride^2 - 1) of every
/// stride^2 taps of ConvTranspose's gather form, so a DCGAN counts about 4x its op-level FLOPs.
#pragma once
#include "scheduler/te/compute.h"

namespace kiln {

double stage_flops(const te::Stage& s);
double dag_flops(const te::ComputeDAG& dag);

}  // namespace kiln
