/// \file Helpers shared by the nn family's lowerings (nn_conv_lowering.cc, nn_pool_lowering.cc,
/// nn_resize_lowering.cc): sliding-window index arithmetic and the family's registration hooks. The
/// window geometry itself (pads, strides, output extents) comes from frontend/ops/nn_common.h, so the
/// lowerings agree with shape inference and the reference kernels by construction.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "frontend/ops/nn_common.h"
#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te::nn_lower {

/// The dtype arithmetic happens in: half-precision floats compute in float32, everything else in
/// its own dtype.
DType compute_dtype(DType t);

/// `a && b`, where a null condition means "always true".
Expr and_cond(const Expr& a, const Expr& b);
/// select(cond, value, fallback), or just `value` when cond is null (always true).
Expr guarded(const Expr& cond, const Expr& value, const Expr& fallback);

/// The input position `o * stride + k * dilation - pad_begin` a window tap reads along spatial axis a.
Expr window_pos(const nn::Window& w, size_t a, const Expr& o, const Expr& k);

/// The condition that `pos` (one of window_pos's values for axis a) lies in [0, extent); null when
/// the window geometry already keeps every position of the axis inside, so no check is needed.
Expr window_inside(const nn::Window& w, size_t a, int64_t extent, const Expr& pos);

/// Whether some tap of the window reads outside an input of spatial extents `in`.
bool window_leaves(const nn::Window& win, const Shape& in);

/// x (N x C x spatial... [x more axes], the window over the spatial axes) with the window's padding
/// stored as zeros: padded position p of spatial axis a holds input position p - pads_begin[a], up to
/// the last position a window reads. The returned window reads it with no padding, so no tap needs a
/// bounds check (a stage of its own, as TVM's data_pad).
std::pair<TensorRef, nn::Window> zero_padded(const LowerContext& c, const TensorRef& x, nn::Window win);
/// The same with the padding stored as `fill` (a max pool's: the dtype's lowest value).
std::pair<TensorRef, nn::Window> padded_with(const LowerContext& c, const TensorRef& x, nn::Window win, const Expr& fill);

/// How many taps of the window at output position `o` along axis a read positions in [lo, hi), as
/// an Int64 expression (an immediate when it is the same for every output position).
Expr window_tap_count(const nn::Window& w, size_t a, const Expr& o, int64_t lo, int64_t hi);
/// The same count at compile time, for one output position.
int64_t window_tap_count_at(const nn::Window& w, size_t a, int64_t o, int64_t lo, int64_t hi);

/// The value of a quantization parameter (scale or zero point) for `channel`: the single value of a
/// per-tensor parameter, or element `channel` of a per-channel one.
Expr quant_param(const TensorRef& t, const Expr& channel);

/// Row-major index vector of `flat` into `shape` (Int64 index arithmetic).
std::vector<Expr> unravel(const Expr& flat, const Shape& shape);

/// Per output channel, the sum of the elements of constant weight input `w_in`, when its zero points
/// (input `w_zp`) are absent or all zero; otherwise nullptr.
std::shared_ptr<const Tensor> symmetric_weight_sums(const LowerContext& c, size_t w_in, size_t w_zp);
/// Where a quantized conv's accumulator keeps its output channels: NCHW's axis 1, or blocks of
/// `block` (N x M/block x spatial... x block, channels past M padded), so that a vector of int32
/// accumulators spans output channels (int8_dot_conv_lowering.cc).
struct ChannelLayout {
  int64_t channels = 0;  ///< the channels with a place, padded ones included
  int64_t real = 0;      ///< the op's output channels
  std::function<Expr(const std::vector<Expr>&)> channel;  ///< an element's index -> its channel
  static ChannelLayout nchw(int64_t channels);
  static ChannelLayout blocked(int64_t channels, int64_t block);
};
/// `sum` (an int32 conv sum over x + shift) less, per output channel m, x_zero * sums[m] - bias[m]:
/// the zero point's term and the bias as one constant a channel, wrapped to int32 as the accumulator
/// wraps. x_zero is x's zero point plus the shift; `bias` may be null; padded channels get 0.
TensorRef minus_channel_constants(const LowerContext& c, const std::string& name, const TensorRef& sum, int64_t x_zero,
                                  const Tensor& sums, const Tensor* bias, const ChannelLayout& layout);
/// A QLinearConv's output from its int32 accumulator (bias included), in the accumulator's shape and
/// layout, as stage `name`: scaled by x_scale * w_scale / y_scale, rounded, plus y's zero point,
/// saturated; in float32, as ONNX Runtime does.
TensorRef requantized_conv_output(const LowerContext& c, const TensorRef& acc, const std::string& name, const ChannelLayout& layout);

void register_conv_lowerings(LoweringRegistry& r);
void register_int8_dot_conv_lowering(LoweringRegistry& r);  // kiln.QLinearConvDot4, kiln.QLinearConvBlocked
/// kiln.QLinearConvBlocked of a depthwise conv (blocked_layout_lowering.cc).
void lower_qlinear_depthwise_blocked(LowerContext& c);
/// Stage `name`: blocked x (N x Cb x S... x b) as NCHW of shape `out` (its first out[1] channels).
TensorRef from_blocks(const std::string& name, const TensorRef& x, const Shape& out);
void register_pool_lowerings(LoweringRegistry& r);
void register_resize_lowerings(LoweringRegistry& r);
void register_blocked_layout_lowerings(LoweringRegistry& r);  // domain "kiln"
void register_recurrent_lowerings(LoweringRegistry& r);       // LSTM, GRU, RNN: recurrent_lowering.cc

}  // namespace kiln::te::nn_lower
