/// \file Gemm weights stored in the order the kernel reads them.
///
/// Why: a Gemm computes A x op(B), and the default schedule's vector runs along the output's columns,
/// which are B's columns. With transB = 1 (how PyTorch exports nn.Linear: B is N x K) those columns
/// are rows of the stored B, so each vector load of B was a gather of 16 floats K apart: ResNet-50's
/// and MobileNet-V2's classifiers (1 x 2048 x 1000, 1 x 1280 x 1000) gathered every weight. A constant
/// B is transposed once at compile time instead, and the Gemm reads it with transB = 0.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Replaces the constant, float, 2-D B of every Gemm with transB = 1 by its transpose and clears
/// transB. Returns how many Gemms changed. The numbers are unchanged (a transpose is exact); the
/// old constant is left to remove_dead_nodes.
int transpose_gemm_weights(Graph& g);

}  // namespace kiln
