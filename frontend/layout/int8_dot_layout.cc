#include "frontend/layout/int8_dot_layout.h"

namespace kiln {
namespace {

// Input `i` of `n` when it is a compile-time constant, else nullptr (absent inputs included).
const Tensor* constant_input(const Graph& g, const Node& n, size_t i) {
  return i < n.inputs.size() && !n.inputs[i].empty() ? g.value(n.inputs[i]).constant.get() : nullptr;
}

bool is_8bit(DType t) { return t == DType::Int8 || t == DType::UInt8; }

// Whether QLinearConv `n` has what kiln.QLinearConvDot4 needs (int8_dot_layout.h).
bool conv_runs_as_dot4(const Graph& g, const Node& n) {
  auto present = [&](size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); };
  const Tensor* w = constant_input(g, n, 3);
  const Tensor* zx = constant_input(g, n, 2);
  if (!is_8bit(g.value(n.inputs[0]).dtype) || !w || w->dtype() != DType::Int8 || w->shape().size() < 3 || !zx ||
      zx->size() != 1)
    return false;
  // Quads of input channels, or else of taps along a kernel row of at least 3 (a quarter padding
  // at most); a 1x1 conv over 1-3 channels would be mostly padding.
  if (w->shape()[1] % 4 != 0 && w->shape().back() < 3) return false;
  if (present(8) && !constant_input(g, n, 8)) return false;
  if (present(5)) {
    const Tensor* zw = constant_input(g, n, 5);
    if (!zw) return false;
    for (int64_t v : zw->to_ints())
      if (v != 0) return false;
  }
  return true;
}

// Whether integer matmul `n`, its B at input `b`, has a constant 2-D int8 B and an 8-bit A: its
// lowering packs B at compile time and reads the zero points as the op does.
bool matmul_runs_as_dot4(const Graph& g, const Node& n, size_t b) {
  const Tensor* w = constant_input(g, n, b);
  return is_8bit(g.value(n.inputs[0]).dtype) && w && w->dtype() == DType::Int8 && w->shape().size() == 2;
}

// Whether a Dot4 conv accumulates in blocks of `block` output channels (int8_dot_layout.h): one
// group, and at least a block of outputs (fewer would be mostly padding lanes).
bool conv_blocks_outputs(const Graph& g, const Node& n, int64_t block) {
  const Shape& ws = g.value(n.inputs[3]).shape;
  return block > 1 && n.attr_int("group", 1) == 1 && ws[0] >= block;
}

}  // namespace

int64_t int8_output_block(int vector_bits, bool signed_bytes) {
  return vector_bits >= 256 && !signed_bytes ? vector_bits / 32 : 1;
}

int use_int8_dot_products(Graph& g, bool signed_bytes, int64_t output_block) {
  int moved = 0;
  for (Node& n : g.nodes) {
    if (!n.domain.empty()) continue;
    const bool dot4 = (n.op_type == "QLinearConv" && conv_runs_as_dot4(g, n)) ||
                      (n.op_type == "QLinearMatMul" && matmul_runs_as_dot4(g, n, 3)) ||
                      (n.op_type == "MatMulInteger" && matmul_runs_as_dot4(g, n, 1));
    if (!dot4) continue;
    n.op_type += "Dot4";
    n.domain = "kiln";
    n.opset = 1;  // kiln's ops have one version
    if (signed_bytes) n.attrs["dot"] = AttrValue(std::string("s8s8"));
    if (n.op_type == "QLinearConvDot4" && conv_blocks_outputs(g, n, output_block)) n.attrs["block"] = AttrValue(output_block);
    ++moved;
  }
  return moved;
}

}  // namespace kiln
