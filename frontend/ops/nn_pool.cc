// Pooling: MaxPool, AveragePool, LpPool, their Global* forms, and MaxUnpool.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/ops/nn_common.h"
#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::nn {
namespace {

struct PoolShape {
  Shape in;  // full input shape
  Window window;
  int64_t planes() const { return in[0] * in[1]; }
  Shape out_shape() const {
    Shape s{in[0], in[1]};
    s.insert(s.end(), window.out.begin(), window.out.end());
    return s;
  }
};

PoolShape pool_shape(const Node& node, const Shape& x, bool allow_ceil_mode) {
  PoolShape ps;
  ps.in = x;
  Shape spatial = spatial_dims(node, x, "input X");
  ps.window = forward_window(node, spatial, node.required_ints("kernel_shape"), allow_ceil_mode);
  return ps;
}

// One output position's window: the in-plane offsets of the input elements it covers, and how many
// of its taps fall inside the input or its explicit padding (the average's divisor with
// count_include_pad; taps past the padding only exist because of ceil_mode).
struct WindowTaps {
  std::vector<int64_t> offsets;
  int64_t in_padded_extent = 0;
};

// Calls fn(plane, out_flat_in_plane, taps) for every output element.
template <typename Fn>
void for_each_window(const PoolShape& ps, Fn&& fn) {
  const Window& w = ps.window;
  size_t r = w.rank();
  Shape in_spatial(ps.in.begin() + 2, ps.in.end());
  std::vector<int64_t> in_strides = strides_of(in_spatial);
  int64_t out_size = num_elements(w.out), ksize = w.kernel_size();
  // Per-output-element tap lists do not depend on the plane: build them once.
  std::vector<WindowTaps> windows(static_cast<size_t>(out_size));
  std::vector<int64_t> o(r, 0), k(r, 0);
  for (int64_t flat = 0; flat < out_size; ++flat, next_index(o, w.out)) {
    WindowTaps& taps = windows[flat];
    std::fill(k.begin(), k.end(), 0);
    for (int64_t t = 0; t < ksize; ++t, next_index(k, w.kernel)) {
      bool inside = true, in_padding = true;
      int64_t offset = 0;
      for (size_t a = 0; a < r; ++a) {
        int64_t pos = o[a] * w.strides[a] + k[a] * w.dilations[a] - w.pads_begin[a];
        if (pos < 0 || pos >= in_spatial[a]) inside = false;
        if (pos >= in_spatial[a] + w.pads_end[a]) in_padding = false;
        offset += pos * in_strides[a];
      }
      if (inside) taps.offsets.push_back(offset);
      taps.in_padded_extent += in_padding;
    }
  }
  for (int64_t p = 0; p < ps.planes(); ++p)
    for (int64_t flat = 0; flat < out_size; ++flat) fn(p, flat, windows[flat]);
}

// Turns an in-plane row-major offset into a column-major one (MaxPool's storage_order = 1).
int64_t column_major_offset(int64_t offset, const Shape& spatial) {
  std::vector<int64_t> idx = unravel_index(offset, spatial);
  int64_t out = 0, stride = 1;
  for (size_t a = 0; a < spatial.size(); ++a) {
    out += idx[a] * stride;
    stride *= spatial[a];
  }
  return out;
}

double window_flops(const NodeShapes& s, double per_tap, double per_output) {
  const Node& n = s.node;
  double taps = 1;
  for (int64_t k : n.attr_ints("kernel_shape")) taps *= static_cast<double>(k);
  return static_cast<double>(num_elements(s.out[0])) * (taps * per_tap + per_output);
}

}  // namespace

Tensor max_pool_reference(const Node& node, const Tensor& x, Tensor* indices_out) {
  PoolShape ps = pool_shape(node, x.shape(), true);
  bool column_major = node.attr_int("storage_order", 0) == 1;
  Shape spatial(x.shape().begin() + 2, x.shape().end());
  int64_t in_plane = num_elements(spatial), out_plane = num_elements(ps.window.out);
  std::vector<double> xv = x.to_doubles();
  Tensor y(x.dtype(), ps.out_shape());
  Tensor indices = indices_out ? Tensor(DType::Int64, ps.out_shape()) : Tensor();
  for_each_window(ps, [&](int64_t p, int64_t flat, const WindowTaps& taps) {
    // The first maximum wins; a window entirely in the padding yields 0 and index -1.
    double best = 0;
    int64_t best_at = -1;
    for (int64_t off : taps.offsets) {
      double v = xv[p * in_plane + off];
      if (best_at < 0 || v > best) {
        best = v;
        best_at = off;
      }
    }
    int64_t at = p * out_plane + flat;
    y.set_double(at, best);
    if (!indices_out) return;
    if (best_at >= 0) best_at = p * in_plane + (column_major ? column_major_offset(best_at, spatial) : best_at);
    indices.set_int(at, best_at);
  });
  if (indices_out) *indices_out = std::move(indices);
  return y;
}

Tensor average_pool_reference(const Node& node, const Tensor& x) {
  PoolShape ps = pool_shape(node, x.shape(), true);
  bool count_pad = node.attr_int("count_include_pad", 0) != 0;
  int64_t in_plane = num_elements(Shape(x.shape().begin() + 2, x.shape().end()));
  int64_t out_plane = num_elements(ps.window.out);
  std::vector<double> xv = x.to_doubles();
  Tensor y(x.dtype(), ps.out_shape());
  for_each_window(ps, [&](int64_t p, int64_t flat, const WindowTaps& taps) {
    double sum = 0;
    for (int64_t off : taps.offsets) sum += xv[p * in_plane + off];
    double count = static_cast<double>(count_pad ? taps.in_padded_extent : static_cast<int64_t>(taps.offsets.size()));
    y.set_double(p * out_plane + flat, count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN());
  });
  return y;
}

namespace {

OpDef max_pool_op() {
  OpDef d;
  d.op_type = "MaxPool";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    DType t = c.dtype(0);
    if (!is_float(t) && t != DType::Int8 && t != DType::UInt8)
      c.unsupported("dtype " + dtype_name(t) + " is not supported");
    int64_t storage_order = c.node().attr_int("storage_order", 0);
    if (storage_order != 0 && storage_order != 1) c.fail("storage_order must be 0 or 1");
    PoolShape ps = pool_shape(c.node(), c.shape(0), true);
    c.set_output(0, t, ps.out_shape());
    c.set_output(1, DType::Int64, ps.out_shape());
  };
  d.eval = [](EvalContext& c) {
    Tensor indices;
    Tensor y = max_pool_reference(c.node(), c.input(0), &indices);
    c.set_output(0, std::move(y));
    c.set_output(1, std::move(indices));
  };
  d.flops = [](const NodeShapes& s) { return window_flops(s, 1, 0); };  // one comparison per tap
  return d;
}

OpDef average_pool_op() {
  OpDef d;
  d.op_type = "AveragePool";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_float(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    c.set_output(0, c.dtype(0), pool_shape(c.node(), c.shape(0), true).out_shape());
  };
  d.eval = [](EvalContext& c) { c.set_output(0, average_pool_reference(c.node(), c.input(0))); };
  d.flops = [](const NodeShapes& s) { return window_flops(s, 1, 1); };  // adds, then one divide
  return d;
}

// LpPool's p: an int since opset 2 (a float in opset 1).
double lp_order(const Node& n) {
  auto it = n.attrs.find("p");
  if (it != n.attrs.end() && std::holds_alternative<double>(it->second)) return std::get<double>(it->second);
  double p = static_cast<double>(n.attr_int("p", 2));
  if (p <= 0) throw Error(n.label() + ": p must be positive");
  return p;
}

double lp_norm(double sum_of_powers, double p) { return p == 2 ? std::sqrt(sum_of_powers) : std::pow(sum_of_powers, 1 / p); }
double lp_term(double v, double p) { return p == 2 ? v * v : p == 1 ? std::fabs(v) : std::pow(std::fabs(v), p); }

OpDef lp_pool_op() {
  OpDef d;
  d.op_type = "LpPool";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_float(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    lp_order(c.node());
    c.set_output(0, c.dtype(0), pool_shape(c.node(), c.shape(0), true).out_shape());
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    PoolShape ps = pool_shape(c.node(), x.shape(), true);
    double p = lp_order(c.node());
    int64_t in_plane = num_elements(Shape(x.shape().begin() + 2, x.shape().end()));
    int64_t out_plane = num_elements(ps.window.out);
    std::vector<double> xv = x.to_doubles();
    Tensor y(x.dtype(), ps.out_shape());
    for_each_window(ps, [&](int64_t plane, int64_t flat, const WindowTaps& taps) {
      double sum = 0;
      for (int64_t off : taps.offsets) sum += lp_term(xv[plane * in_plane + off], p);
      y.set_double(plane * out_plane + flat, lp_norm(sum, p));
    });
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return window_flops(s, 2, 1); };  // power and add per tap, one root
  return d;
}

// ---- Global pooling ---------------------------------------------------------------------------

enum class GlobalKind { Average, Max, Lp };

OpDef global_pool_op(std::string name, GlobalKind kind) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_float(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    Shape out = c.shape(0);
    spatial_dims(c.node(), out, "input X");
    std::fill(out.begin() + 2, out.end(), 1);
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [kind](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape out = x.shape();
    std::fill(out.begin() + 2, out.end(), 1);
    int64_t planes = out[0] * out[1];
    int64_t plane = planes ? x.size() / planes : 0;
    double p = kind == GlobalKind::Lp ? lp_order(c.node()) : 1;
    Tensor y(x.dtype(), out);
    for (int64_t i = 0; i < planes; ++i) {
      double acc = kind == GlobalKind::Max ? -std::numeric_limits<double>::infinity() : 0;
      for (int64_t j = 0; j < plane; ++j) {
        double v = x.get_double(i * plane + j);
        if (kind == GlobalKind::Max) acc = std::isnan(v) || v > acc ? v : acc;
        else if (kind == GlobalKind::Average) acc += v;
        else acc += lp_term(v, p);
      }
      if (kind == GlobalKind::Average) acc /= static_cast<double>(plane);
      if (kind == GlobalKind::Lp) acc = lp_norm(acc, p);
      y.set_double(i, acc);
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [kind](const NodeShapes& s) {
    double in = static_cast<double>(num_elements(s.in[0])), out = static_cast<double>(num_elements(s.out[0]));
    return kind == GlobalKind::Max ? in : kind == GlobalKind::Average ? in + out : 2 * in + out;
  };
  return d;
}

// ---- MaxUnpool ------------------------------------------------------------------------------

// The shape MaxUnpool's window implies: the input of the MaxPool that produced X and the indices.
Shape unpooled_shape(const Node& node, const Shape& x) {
  Shape spatial = spatial_dims(node, x, "input X");
  size_t r = spatial.size();
  std::vector<int64_t> kernel = node.required_ints("kernel_shape");
  if (kernel.size() != r) fail(node, "kernel_shape must have one value per spatial axis");
  std::vector<int64_t> strides = spatial_attr(node, "strides", r, 1, 1);
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  if (pads.size() != 2 * r) fail(node, "attribute 'pads' must have two values per spatial axis");
  Shape out{x[0], x[1]};
  for (size_t a = 0; a < r; ++a) {
    int64_t e = (spatial[a] - 1) * strides[a] + kernel[a] - pads[a] - pads[a + r];
    if (e < 1) fail(node, "pads leave no output on spatial axis " + std::to_string(a));
    out.push_back(e);
  }
  return out;
}

// The output: the explicit output_shape input when given (at least the unpooled shape on every
// axis: the unpooled values keep their coordinates and the rest is zero), else the unpooled shape.
Shape unpool_output_shape(const Node& node, const Shape& x, const Tensor* output_shape) {
  Shape unpooled = unpooled_shape(node, x);
  if (!output_shape) return unpooled;
  Shape out = output_shape->to_ints();
  if (out.size() != x.size()) fail(node, "output_shape must have " + std::to_string(x.size()) + " values");
  for (size_t a = 0; a < out.size(); ++a)
    if (out[a] < unpooled[a])
      fail(node, "output_shape " + shape_str(out) + " is smaller than the unpooled shape " + shape_str(unpooled));
  return out;
}

OpDef max_unpool_op() {
  OpDef d;
  d.op_type = "MaxUnpool";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "I");
    if (!is_float(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    if (c.dtype(1) != DType::Int64) c.fail("indices I must be int64, got " + dtype_name(c.dtype(1)));
    if (c.shape(1) != c.shape(0)) c.fail("indices I have shape " + shape_str(c.shape(1)) + ", X has " + shape_str(c.shape(0)));
    const Tensor* out_shape = c.has_input(2) ? &c.require_constant(2, "output_shape") : nullptr;
    c.set_output(0, c.dtype(0), unpool_output_shape(c.node(), c.shape(0), out_shape));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& indices = c.input(1);
    Shape unpooled = unpooled_shape(c.node(), x.shape());
    Tensor y(x.dtype(), unpool_output_shape(c.node(), x.shape(), c.has_input(2) ? &c.input(2) : nullptr));
    int64_t unpooled_size = num_elements(unpooled);
    bool same = unpooled == y.shape();
    for (int64_t i = 0; i < x.size(); ++i) {
      // Indices are flat positions in the unpooled shape.
      int64_t at = indices.get_int(i);
      if (at < 0 || at >= unpooled_size)
        c.fail("index " + std::to_string(at) + " is outside the unpooled shape " + shape_str(unpooled));
      if (!same) at = ravel_index(unravel_index(at, unpooled), y.shape());
      y.set_double(at, x.get_double(i));
    }
    c.set_output(0, std::move(y));
  };
  return d;
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  r.add(max_pool_op());
  r.add(average_pool_op());
  r.add(lp_pool_op());
  r.add(global_pool_op("GlobalAveragePool", GlobalKind::Average));
  r.add(global_pool_op("GlobalMaxPool", GlobalKind::Max));
  r.add(global_pool_op("GlobalLpPool", GlobalKind::Lp));
  r.add(max_unpool_op());
}

}  // namespace kiln::nn
