// BitCast: reinterprets a tensor's bytes as another dtype.
#include <cstring>

#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

// ONNX BitCast requires equal element widths (same shape). kiln also accepts different widths with the
// usual convention: a wider source gains a trailing axis of width ratio, a narrower source loses a
// trailing axis that must equal the ratio. Bytes are little endian, as kiln stores them.
Shape bitcast_shape(const Node& node, DType from, DType to, const Shape& in) {
  size_t from_size = dtype_size(from), to_size = dtype_size(to);
  Shape out = in;
  if (from_size > to_size) {
    out.push_back(static_cast<int64_t>(from_size / to_size));
  } else if (from_size < to_size) {
    int64_t ratio = static_cast<int64_t>(to_size / from_size);
    if (in.empty() || in.back() != ratio)
      fail(node, "casting " + dtype_name(from) + " to " + dtype_name(to) + " needs a last axis of " +
                     std::to_string(ratio) + ", got shape " + shape_str(in));
    out.pop_back();
  }
  return out;
}

DType bitcast_target(const Node& node) {
  DType to = dtype_from_int(static_cast<int32_t>(node.required_int("to")));
  if (!is_supported(to)) throw Unsupported(node.label() + ": target dtype " + dtype_name(to) + " is not supported");
  return to;
}

OpDef bitcast_op() {
  OpDef d;
  d.op_type = "BitCast";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    DType to = bitcast_target(c.node());
    c.set_output(0, to, bitcast_shape(c.node(), c.dtype(0), to, c.shape(0)));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    DType to = bitcast_target(c.node());
    Tensor y(to, bitcast_shape(c.node(), x.dtype(), to, x.shape()));
    std::memcpy(y.data(), x.data(), x.byte_size());
    c.set_output(0, std::move(y));
  };
  return d;
}

}  // namespace

void register_bitcast_op(OpRegistry& r) {
  r.add(bitcast_op());
}

}  // namespace kiln::misc
