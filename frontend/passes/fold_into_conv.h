/// \file Folding per-channel affine ops into the convolution before them.
///
/// Why: an inference-mode BatchNormalization, or a Mul/Add by a per-output-channel constant, after a
/// Conv or ConvTranspose is an affine map of each output channel, so it can be applied once to the
/// constant weights and bias at compile time instead of as one more pass over the activation at run
/// time (ResNet and MobileNet have one after every convolution). ORT and TVM fold the same way.
///
/// A fold applies when the convolution's weight (and bias, if any) are float constants, the op's
/// parameters are constants that vary along the output channel only, and the convolution's output has
/// no reader but that op (nor is it a graph output). The folded values are computed in double and
/// stored in the weight's dtype; the numbers differ from the unfolded graph by rounding only.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Folds every BatchNormalization (inference mode), Mul and Add that meets the conditions above into
/// the Conv / ConvTranspose that feeds it, repeatedly (Conv -> BN -> Mul folds twice). Returns how
/// many ops were folded. Needs inferred shapes; leaves unused values to remove_dead_nodes.
int fold_into_conv(Graph& g);

/// Rewrites every inference-mode BatchNormalization that fold_into_conv left (its input is not a
/// conv's output of its own: RepVGG's identity branch, a pre-activation block, a norm after a Gemm)
/// as Mul by its per-channel scale and Add of its shift, constants of shape [C, 1, ...]. Why: the
/// same arithmetic, but ops the blocked layout and the fused epilogues take, where a
/// BatchNormalization made its whole block leave the channel blocks and come back (two reorders).
/// Returns how many it rewrote.
int batch_norms_to_affine(Graph& g);

}  // namespace kiln
