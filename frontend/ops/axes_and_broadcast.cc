#include "frontend/ops/axes_and_broadcast.h"

#include <algorithm>

namespace kiln {

int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    throw Error(node.label() + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

std::vector<int64_t> normalize_axes(const Node& node, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(node, a, rank));
  return out;
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return std::nullopt;
  }
  return out;
}

Shape broadcast_inputs(const InferContext& ctx) {
  Shape out;
  bool first = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (first) {
      out = ctx.shape(i);
      first = false;
      continue;
    }
    auto b = broadcast(out, ctx.shape(i));
    if (!b) ctx.fail("input shapes " + shape_str(out) + " and " + shape_str(ctx.shape(i)) + " do not broadcast");
    out = *b;
  }
  return out;
}

std::vector<int64_t> broadcast_index_map(const Shape& out, const Shape& in) {
  int64_t n = num_elements(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  size_t r = out.size();
  // Stride of each output axis in the input; 0 where the input broadcasts.
  std::vector<int64_t> in_stride(r, 0);
  std::vector<int64_t> in_st = strides_of(in);
  for (size_t i = 0; i < in.size(); ++i) {
    size_t oi = i + (r - in.size());
    in_stride[oi] = in[i] == 1 ? 0 : in_st[i];
  }
  std::vector<int64_t> idx(r, 0);
  int64_t src = 0;
  for (int64_t k = 0; k < n; ++k) {
    map[k] = src;
    for (int64_t ax = static_cast<int64_t>(r) - 1; ax >= 0; --ax) {
      ++idx[ax];
      src += in_stride[ax];
      if (idx[ax] < out[ax]) break;
      src -= in_stride[ax] * idx[ax];
      idx[ax] = 0;
    }
  }
  return map;
}

std::vector<int64_t> unravel_index(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return idx;
}

int64_t ravel_index(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + idx[i];
  return flat;
}

std::vector<int64_t> tensor_ints(const Tensor& t) { return t.to_ints(); }

DType same_dtype_inputs(const InferContext& ctx) {
  DType t = ctx.dtype(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.dtype(i) != t)
      ctx.fail("input " + std::to_string(i) + " has dtype " + dtype_name(ctx.dtype(i)) + ", expected " +
               dtype_name(t));
  return t;
}

double flops_per_output_element(const NodeShapes& s) {
  return s.out.empty() ? 0.0 : static_cast<double>(num_elements(s.out[0]));
}

}  // namespace kiln
