/// \file ConvTranspose as a dense Conv of its input followed by a pixel interleave.
///
/// Why: a strided ConvTranspose scatters every input pixel over a K x K window of an s times larger
/// output. Computed per output pixel, most of its taps fall between input pixels and multiply zeros
/// (3/4 of them at stride 2, dcgan's case), and each tap needs a guard or a gather. Split the output by
/// phase instead: output position u = q*s + r (r < s) receives exactly the taps k = r + s*m, from input
/// position q - m, so every phase is an ordinary correlation of the input with an M = ceil(K/s) tap
/// kernel. The s*s phases become s*s output channels per channel of one Conv whose weights are
/// rearranged at compile time; DepthToSpace (CRD) interleaves them into the output grid and a Slice
/// crops what the pads remove. Every multiply is then a real one, and the Conv takes the blocked
/// layout and micro-kernel of every other conv. This is the sub-pixel convolution identity; TVM
/// instead dilates the input with zeros and ORT calls a GEMM then col2im.
///
/// One Conv computes every phase on one grid of rows, the union of the rows the phases need: with
/// pads, phases need different rows (dcgan's k4 s2 p1: phase 0 rows 1..n, phase 1 rows 0..n-1), so
/// the grid has n + 1 rows: on a 4x4 input (5/4)^2 = 1.56 times the work. When the
/// stride divides the output, the *exact split* gives each phase its own Conv (its taps, its pads, n
/// rows), concatenated in DCR order and interleaved by DepthToSpace (DCR); it is used when the shared
/// grid is at least 1/8 larger than the rows needed, which pays for the s^2 Convs.
///
/// Applies to ConvTranspose nodes of the default domain with constant float weights (and bias),
/// dilation 1, and either stride 1 on every axis (any spatial rank: the Conv alone, weights flipped)
/// or 2 spatial axes with the same stride (DepthToSpace has one block size). Any other keeps its
/// ConvTranspose, which stays correct.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Rewrites every ConvTranspose that meets the conditions above; returns how many. Needs inferred
/// shapes; leaves the unused weights to remove_dead_nodes.
int conv_transpose_to_conv(Graph& g);

}  // namespace kiln
