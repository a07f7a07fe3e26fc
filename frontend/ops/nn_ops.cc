// The nn family: convolutions, pooling, Resize. This file holds the family's entry point and the
// sliding-window geometry the conv and pooling files share.
#include "frontend/ops/nn_common.h"

#include <algorithm>

namespace kiln {
namespace nn {

void fail(const Node& node, const std::string& msg) { throw Error(node.label() + ": " + msg); }

Shape spatial_dims(const Node& node, const Shape& shape, const char* what) {
  if (shape.size() < 3)
    fail(node, std::string(what) + " must be N x C x D1 x ... (rank >= 3), got " + shape_str(shape));
  return Shape(shape.begin() + 2, shape.end());
}

std::vector<int64_t> spatial_attr(const Node& node, const char* name, size_t rank, int64_t dflt, int64_t min_value) {
  if (!node.has_attr(name)) return std::vector<int64_t>(rank, dflt);
  std::vector<int64_t> v = node.attr_ints(name);
  if (v.size() != rank)
    fail(node, std::string("attribute '") + name + "' has " + std::to_string(v.size()) + " values, expected " +
                   std::to_string(rank) + " (one per spatial axis)");
  for (int64_t x : v)
    if (x < min_value)
      fail(node, std::string("attribute '") + name + "' has value " + std::to_string(x) + ", must be >= " +
                     std::to_string(min_value));
  return v;
}

int64_t Window::kernel_size() const {
  int64_t n = 1;
  for (int64_t k : kernel) n *= k;
  return n;
}

Window forward_window(const Node& node, const Shape& in_spatial, std::vector<int64_t> kernel, bool allow_ceil_mode) {
  size_t r = in_spatial.size();
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != r)
    fail(node, "kernel has " + std::to_string(w.kernel.size()) + " spatial axes, input has " + std::to_string(r));
  for (int64_t k : w.kernel)
    if (k < 1) fail(node, "kernel extents must be positive");
  w.strides = spatial_attr(node, "strides", r, 1, 1);
  w.dilations = spatial_attr(node, "dilations", r, 1, 1);
  bool ceil_mode = allow_ceil_mode && node.attr_int("ceil_mode", 0) != 0;
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  w.pads_begin.assign(r, 0);
  w.pads_end.assign(r, 0);
  w.out.assign(r, 0);
  if (auto_pad == "NOTSET") {
    if (node.has_attr("pads")) {
      std::vector<int64_t> pads = node.attr_ints("pads");
      if (pads.size() != 2 * r)
        fail(node, "attribute 'pads' has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * r));
      for (int64_t p : pads)
        if (p < 0) fail(node, "negative pads are not supported");
      w.pads_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(r));
      w.pads_end.assign(pads.begin() + static_cast<int64_t>(r), pads.end());
    }
    for (size_t a = 0; a < r; ++a) {
      int64_t room = in_spatial[a] + w.pads_begin[a] + w.pads_end[a] - w.span(a);
      if (room < 0)
        fail(node, "window of extent " + std::to_string(w.span(a)) + " does not fit the padded input extent " +
                       std::to_string(in_spatial[a] + w.pads_begin[a] + w.pads_end[a]) + " on spatial axis " +
                       std::to_string(a));
      int64_t out = (ceil_mode ? ceil_div(room, w.strides[a]) : room / w.strides[a]) + 1;
      // In ceil mode the last window must still start inside the input or its leading padding.
      if (ceil_mode && (out - 1) * w.strides[a] >= in_spatial[a] + w.pads_begin[a]) --out;
      w.out[a] = out;
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < r; ++a) {
      w.out[a] = ceil_div(in_spatial[a], w.strides[a]);
      int64_t total = std::max<int64_t>(0, (w.out[a] - 1) * w.strides[a] + w.span(a) - in_spatial[a]);
      // The odd padding element goes at the end for SAME_UPPER, at the start for SAME_LOWER.
      w.pads_begin[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[a] = total - w.pads_begin[a];
    }
  } else if (auto_pad == "VALID") {
    for (size_t a = 0; a < r; ++a) {
      int64_t room = in_spatial[a] - w.span(a);
      if (room < 0) fail(node, "window does not fit the input on spatial axis " + std::to_string(a) + " (auto_pad VALID)");
      w.out[a] = room / w.strides[a] + 1;
    }
  } else {
    fail(node, "unknown auto_pad '" + auto_pad + "'");
  }
  return w;
}

}  // namespace nn

void register_nn_ops(OpRegistry& r) {
  nn::register_conv_ops(r);
  nn::register_pool_ops(r);
  nn::register_resize_ops(r);
  nn::register_blocked_layout_ops(r);
  nn::register_recurrent_ops(r);
}

}  // namespace kiln
