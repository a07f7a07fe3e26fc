#include "frontend/ops/shape_common.h"

#include <algorithm>
#include <cstring>

namespace kiln::shape_family {

void fail(const Node& node, const std::string& msg) { throw Error(node.label() + ": " + msg); }

void copy_element(Tensor& dst, int64_t dst_index, const Tensor& src, int64_t src_index) {
  size_t esize = dtype_size(src.dtype());
  std::memcpy(dst.data() + static_cast<size_t>(dst_index) * esize, src.data() + static_cast<size_t>(src_index) * esize,
              esize);
}

Tensor gather_by_map(const Tensor& src, Shape shape, const std::vector<int64_t>& map, const Tensor* fill) {
  Tensor out(src.dtype(), std::move(shape));
  for (int64_t i = 0; i < out.size(); ++i) {
    if (map[i] >= 0) copy_element(out, i, src, map[i]);
    else if (fill) copy_element(out, i, *fill, 0);
  }
  return out;
}

int64_t wrap_index(const Node& node, int64_t index, int64_t extent, const char* what) {
  if (index < -extent || index >= extent)
    fail(node, std::string(what) + " " + std::to_string(index) + " is out of range for extent " +
                   std::to_string(extent));
  return index < 0 ? index + extent : index;
}

void require_integer_input(const InferContext& ctx, size_t i, const char* what) {
  if (!is_integer(ctx.dtype(i)))
    ctx.fail(std::string("input '") + what + "' must have an integer dtype, got " + dtype_name(ctx.dtype(i)));
}

std::optional<std::vector<int64_t>> int_input_values(const InferContext& ctx, size_t i, const char* what) {
  if (!ctx.has_input(i)) return std::nullopt;
  require_integer_input(ctx, i, what);
  return tensor_ints(ctx.require_constant(i, what));
}

std::optional<std::vector<int64_t>> int_input_values(const EvalContext& ctx, size_t i, const char*) {
  if (!ctx.has_input(i)) return std::nullopt;
  return tensor_ints(ctx.input(i));
}

void copy_blocks(Tensor& dst, int64_t dst_offset, int64_t dst_stride, const Tensor& src, int64_t src_offset,
                 int64_t src_stride, int64_t rows, int64_t block) {
  size_t esize = dtype_size(src.dtype());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst.data() + (dst_offset + r * dst_stride) * esize, src.data() + (src_offset + r * src_stride) * esize,
                static_cast<size_t>(block) * esize);
}

int64_t extent_product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

void reduce_into(ScatterReduction r, Tensor& dst, int64_t dst_index, const Tensor& src, int64_t src_index) {
  if (r == ScatterReduction::None) {
    copy_element(dst, dst_index, src, src_index);
    return;
  }
  if (is_float(dst.dtype())) {
    double a = dst.get_double(dst_index), b = src.get_double(src_index);
    double v = r == ScatterReduction::Add   ? a + b
               : r == ScatterReduction::Mul ? a * b
               : r == ScatterReduction::Max ? std::max(a, b)
                                                                                                : std::min(a, b);
    dst.set_double(dst_index, v);
    return;
  }
  int64_t a = dst.get_int(dst_index), b = src.get_int(src_index);
  // Unsigned arithmetic wraps like the dtype does; max/min on uint64 must compare unsigned.
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  bool a_less = dst.dtype() == DType::UInt64 ? ua < ub : a < b;
  int64_t v = 0;
  switch (r) {
    case ScatterReduction::Add: v = static_cast<int64_t>(ua + ub); break;
    case ScatterReduction::Mul: v = static_cast<int64_t>(ua * ub); break;
    case ScatterReduction::Max: v = a_less ? b : a; break;
    case ScatterReduction::Min: v = a_less ? a : b; break;
    case ScatterReduction::None: break;
  }
  dst.set_int(dst_index, v);
}

}  // namespace kiln::shape_family
