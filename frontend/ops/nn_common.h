/// \file Internals shared by the nn family files (nn_conv.cc, nn_pool.cc, nn_resize.cc): sliding-window
/// geometry (kernel, strides, dilations, pads, auto_pad, ceil_mode) and the family's registration hooks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/ops/op_registry.h"

namespace kiln::nn {

[[noreturn]] void fail(const Node& node, const std::string& msg);

/// The spatial part (axes 2..) of an N x C x D1 x ... x Dn shape; fails unless the rank is at least 3.
Shape spatial_dims(const Node& node, const Shape& shape, const char* what);

/// A per-spatial-axis int attribute (strides, dilations, ...): `dflt` for every axis when absent, and a
/// failure when its length is not the spatial rank or a value is below `min_value`.
std::vector<int64_t> spatial_attr(const Node& node, const char* name, size_t rank, int64_t dflt, int64_t min_value);

/// Where a sliding window sits along every spatial axis. Output position o along axis a reads input
/// positions o * strides[a] + k * dilations[a] - pads_begin[a] for k in [0, kernel[a]); positions outside
/// [0, input extent) are padding.
struct Window {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  Shape out;  // spatial output extents

  size_t rank() const { return kernel.size(); }
  int64_t kernel_size() const;
  /// (kernel - 1) * dilation + 1: how many input positions one window spans.
  int64_t span(size_t axis) const { return (kernel[axis] - 1) * dilations[axis] + 1; }
};

/// The window of Conv and the pooling ops from their attributes (auto_pad, pads, strides, dilations,
/// and ceil_mode when `allow_ceil_mode`). `kernel` is already known (attribute or weight shape).
Window forward_window(const Node& node, const Shape& in_spatial, std::vector<int64_t> kernel, bool allow_ceil_mode);

/// The window of ConvTranspose node `node` with input shape `x` and weight shape `w`: its pads resolved
/// from pads, auto_pad or output_shape (pads_begin may be negative when output_shape extends the output),
/// `out` the output extents. Output position o along axis a collects input i and tap k where
/// o = i * strides[a] + k * dilations[a] - pads_begin[a].
Window conv_transpose_window(const Node& node, const Shape& x, const Shape& w);

/// Odometer over a box of extents: advances `idx` in row-major order, returns false after the last one.
inline bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& extents) {
  for (size_t a = idx.size(); a-- > 0;) {
    if (++idx[a] < extents[a]) return true;
    idx[a] = 0;
  }
  return false;
}

inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/// MaxPool and AveragePool of an N x C x spatial... tensor as the reference interpreter computes them
/// (the blocked pools evaluate through these too); `indices`, when given, receives MaxPool's Indices.
Tensor max_pool_reference(const Node& node, const Tensor& x, Tensor* indices = nullptr);
Tensor average_pool_reference(const Node& node, const Tensor& x);

void register_conv_ops(OpRegistry& r);
void register_pool_ops(OpRegistry& r);
void register_resize_ops(OpRegistry& r);
void register_blocked_layout_ops(OpRegistry& r);  // domain "kiln": blocked_layout_ops.cc
void register_recurrent_ops(OpRegistry& r);       // LSTM, GRU, RNN: recurrent_ops.cc

}  // namespace kiln::nn
