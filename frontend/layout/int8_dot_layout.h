/// \file The layout stage's int8 part: int8 convs and matmuls whose reductions a target computes four
/// bytes per instruction become kiln's *Dot4 ops.
///
/// Why: an int8 conv as the operator set writes it is one widening multiply and one add per input
/// channel and tap, an int32 vpmulld and vpaddd per 16 of them on AVX-512, which leaves the 8-bit
/// operands' width unused: kiln's int8 DS-CNN ran 5x behind ONNX Runtime's VNNI kernels. x86's VNNI
/// vpdpbusd multiplies four unsigned bytes by four signed bytes and adds the four products to an
/// int32 lane: four multiply-adds for one instruction; without VNNI, vpmaddwd does two.
/// kiln.QLinearConvDot4 is QLinearConv with that reduction order: its lowering
/// (scheduler/te/ops/int8_dot_conv_lowering.cc) packs each four channels of the input into one int32
/// and the weights likewise, and sums ExprOp::Dot4U8S8 terms. Where the channels of a group do not
/// come in quads (depthwise convs, a one-channel input), the quads are four taps of a kernel row
/// instead, padded with zero weights: 3 of 4 lanes used for a 3x3 kernel. kiln.QLinearMatMulDot4
/// and kiln.MatMulIntegerDot4 pack four k of A and B (scheduler/te/ops/linalg_quant_lowering.cc).
///
/// What moves: a QLinearConv with an int8 or uint8 input, a constant scalar input zero point, int8
/// constant weights with zero zero points (symmetric, how ONNX Runtime's quantizer writes them)
/// whose per-group input channels are a multiple of 4 or whose kernel rows are at least 3 taps, and
/// a constant bias or none; a QLinearMatMul or MatMulInteger whose B is a constant int8 matrix and
/// whose A is int8 or uint8.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Renames every op of `g` that "What moves" names to its *Dot4 form; returns how many. For the
/// targets where that measured faster (toolchain/layout_target.h): x86, with VNNI (one vpdpbusd)
/// and without (a vpmaddwd and a horizontal add, codegen's expansion), AArch64 with sdot, and
/// Cortex-M with the DSP extension (two SMLADs of byte pairs, codegen.cc). With
/// `signed_bytes`, each gets the attribute dot = "s8s8": its lowering sums signed-by-signed dot
/// products, AArch64's sdot (scheduler/te/ops/dot4_form.h). With `output_block` > 1, a conv of one
/// group with at least that many outputs gets the attribute block = output_block: it accumulates
/// in blocks of output channels (int8_dot_conv_lowering.cc).
int use_int8_dot_products(Graph& g, bool signed_bytes = false, int64_t output_block = 1);

/// The output-channel block of int8 convs on a target with `vector_bits`-wide vectors: its int32
/// lanes on x86 with AVX2 or AVX-512 (squeezenet int8: bench/RESULTS.md), else 1. AArch64's sdot
/// (`signed_bytes`) keeps rows: with 4 lanes a vector of output channels is no wider than a row's.
int64_t int8_output_block(int vector_bits, bool signed_bytes);

}  // namespace kiln
