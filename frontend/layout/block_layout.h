/// \file The layout stage: convolutions move to a blocked activation layout, NCHW[b]c.
///
/// Why: in NCHW the only contiguous axis of a convolution's output is its row, so a 7- or 14-wide row
/// fills no 16-lane vector and every weight is a scalar broadcast. In NCHW[b]c (b channels innermost, b
/// the target's vector width in floats) the output-channel block is the vector whatever the image
/// size, and the weights, repacked once at compile time into the order the kernel reads them
/// (Co/bo x Ci/bi x KH x KW x bi x bo), are read as whole vectors. This is the layout of ORT's NCHWc
/// transformer and TVM's x86 conv schedules; this pass is kiln's own.
///
/// What moves: every 1-D, 2-D or 3-D float32 Conv with constant weights and group 1, or groups that
/// fill whole blocks of input and output channels (ResNeXt's), becomes kiln.ConvBlocked (N x C/b x
/// [D x] H x W x b), and every 2-D depthwise one (a group per channel)
/// whose input is blocked already kiln.DepthwiseConvBlocked on its input's blocks (one on an NCHW
/// input stays: reordering that input costs about what the conv does). The ops after them stay
/// blocked when they can compute on the blocked tensor directly: elementwise activations,
/// Add/Sub/Mul/Max/Min of blocked tensors (one may broadcast per channel: N x C/b x 1 x 1 x b), of a
/// scalar or per-channel constant (repacked), or of a per-channel activation computed in NCHW (a
/// squeeze-and-excitation scale, reordered: one value per channel); Div by a constant without zeros;
/// Dropout (an Identity at inference); MaxPool without Indices and AveragePool
/// (kiln.MaxPoolBlocked / AveragePoolBlocked); Concat along channels of whole blocks; a Slice of
/// channels that channel_slice_stays_blocked allows;
/// GlobalAveragePool (a ReduceMean over the blocked tensor's spatial axes); DepthToSpace (DCR) of whole
/// blocks; Resize of the spatial axes by constant scales or sizes (the same Resize over the blocks). Everything else reads
/// NCHW: a kiln.ReorderFromBlocked is placed before the first such reader (and for graph outputs),
/// and a kiln.ReorderToBlocked before a conv whose input is not blocked yet, so reorders sit only at
/// the edges of blocked regions and a reorder back and forth never happens. Channels past a multiple
/// of b are zero-padded, never dropped; the ops kept blocked map 0 to a finite value, and padded
/// input channels have zero weights, so padding never reaches a real channel.
///
/// int8: a kiln.QLinearConvDot4 with the attribute block = b (int8_dot_layout.h) becomes
/// kiln.QLinearConvBlocked, reading its input's blocks (or NCHW rows when it has none yet) and
/// writing blocks of codes; per-tensor QuantizeLinear / DequantizeLinear, MaxPool, Concat and Identity
/// of codes stay blocked after it, as does a depthwise int8 conv on blocked codes.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Rewrites `g` (shapes inferred) to blocked layouts with blocks of `block` channels (a conv whose
/// input has fewer channels reads them as one block). Returns the number of convolutions moved.
/// block <= 1 leaves the graph alone.
int block_layout(Graph& g, int64_t block);

/// The block for float32 activations on a target with `vector_bits`-wide vectors (0: none).
int64_t float_block_for(int vector_bits);

/// Whether a Slice keeping channels [begin, end) of a blocked tensor of `channels` channels in blocks
/// of `block` stays on the blocks: it starts at a block and ends at one or at the last channel (the
/// part's padded channels are then the whole's). Any other takes the whole out of the blocks. The
/// substitution search's cost asks the same (frontend/subst/graph_cost.h).
bool channel_slice_stays_blocked(int64_t begin, int64_t end, int64_t channels, int64_t block);

}  // namespace kiln
