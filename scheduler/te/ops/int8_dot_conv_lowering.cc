// kiln.QLinearConvDot4 (frontend/layout/int8_dot_layout.h): a QLinearConv whose reduction runs four
// input channels, or four taps of a kernel row, at a time, one Dot4U8S8 per step, which a target
// with VNNI computes as one vpdpbusd lane (four multiply-adds instead of a vpmulld and a vpaddd each).
//
// Two operands of four bytes each:
// - the input, repacked by a stage of its own: element [n, q, y, x] holds channels 4q .. 4q+3 of
//   pixel (y, x), or [n, c, y, t, x] the four pixels under taps 4t .. 4t+3 of output column x, as
//   unsigned bytes (int8 values plus 128; the instruction multiplies unsigned by signed), padded
//   with the zero point so the loop nest reads no bounds. One pass over the input (four for tap
//   quads), as a float conv's padded copy is; the output stays NCHW, so its vectors run along the
//   row as every other int8 stage's do.
// - the weights, packed at compile time the same way (taps past the kernel's end weigh 0).
// sum (x - zx) * w = sum (x + s) * w - (zx + s) * sum w, with s = 128 for int8 inputs and 0 for
// uint8 ones: the second term and the bias are one int32 per output channel, as QLinearConv's
// symmetric-weight path computes them (nn_conv_lowering.cc), and padding taps, which read zx + s,
// add nothing. int32 arithmetic wraps in both, so the accumulator is the same integer.
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// How a conv's reduction is cut into quads: four input channels (whole quads of them in each group),
// or else four taps along the kernel's last axis (depthwise convs, DS-CNN's one-channel input),
// zero-weighted past its end.
enum class QuadAxis { Channels, KernelWidth };

// The input as int32 quads of unsigned bytes (int8_dot_layout.h), padded with the zero point `zx`
// for window `win`; `shift` is 128 for int8 inputs, 0 for uint8.
// - Channels: [N, C/4, padded spatial...]; byte j of [n, q, p...] is channel 4q + j at p.
// - KernelWidth: [N, C, padded spatial but the last..., KQ, OW]; byte j of [n, c, p..., kq, ow] is
//   the input under tap 4kq + j of the last axis for output column ow. Columns are innermost, so
//   the reduction's vectors along an output row read contiguous quads whatever the stride.
TensorRef packed_input(const LowerContext& c, const TensorRef& x, const nn::Window& win, QuadAxis axis, int64_t zx,
                       int64_t shift) {
  const size_t rank = win.rank(), last = rank - 1;
  const int64_t kq = (win.kernel[last] + 3) / 4;
  Shape shape{x->shape[0], axis == QuadAxis::Channels ? x->shape[1] / 4 : x->shape[1]};
  for (size_t a = 0; a < rank; ++a)
    if (axis == QuadAxis::Channels || a < last) shape.push_back((win.out[a] - 1) * win.strides[a] + win.span(a));
  if (axis == QuadAxis::KernelWidth) {
    shape.push_back(kq);
    shape.push_back(win.out[last]);
  }
  const DType i32 = DType::Int32;
  return compute(c.name("quads"), "pad", i32, shape, [&](const std::vector<Expr>& idx) {
    Expr quad;
    for (int64_t j = 0; j < 4; ++j) {
      std::vector<Expr> xi{idx[0], axis == QuadAxis::Channels ? idx[1] * 4 + j : idx[1]};
      Expr inside;
      for (size_t a = 0; a < rank; ++a) {
        Expr pos = idx[2 + a];  // a padded position
        if (axis == QuadAxis::KernelWidth && a == last) {
          Expr k = idx[2 + a] * 4 + j;  // tap 4kq + j
          if (win.kernel[last] % 4 != 0) inside = and_cond(inside, k < int_imm(win.kernel[last]));
          pos = idx[3 + a] * win.strides[a] + k * win.dilations[a];
        }
        Expr at_x = pos - win.pads_begin[a];
        inside = and_cond(inside, window_inside(win, a, x->shape[2 + a], at_x));
        xi.push_back(at_x);
      }
      Expr byte = guarded(inside, cast(i32, at(x, xi)), int_imm(zx, i32)) + int_imm(shift, i32);
      if (j > 0) byte = binary(ExprOp::Shl, byte, int_imm(8 * j, i32));
      quad = quad ? binary(ExprOp::BitOr, quad, byte) : byte;
    }
    return quad;
  });
}

// The weights [M, C/group, K...] as int32 quads: [M, C/(4 group), K...] along the channels, or
// [M, C/group, K... but the last, KQ] along the last kernel axis (taps past its end weigh 0). Byte j
// is the weight's two's complement byte.
Tensor packed_weights(const Tensor& w, QuadAxis axis) {
  const Shape& ws = w.shape();
  const int64_t kw = ws.back(), kq = (kw + 3) / 4;
  Shape shape = ws;
  if (axis == QuadAxis::Channels) shape[1] /= 4;
  else shape.back() = kq;
  const int64_t taps = num_elements(Shape(ws.begin() + 2, ws.end()));
  std::vector<int64_t> quads(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < quads.size(); ++i) {
    const int64_t q = static_cast<int64_t>(i);
    uint32_t bits = 0;
    for (int64_t j = 0; j < 4; ++j) {
      int64_t v = 0;
      if (axis == QuadAxis::Channels) {  // q = (m * C/4 + cq) * taps + k
        const int64_t k = q % taps, mc = q / taps;
        v = w.get_int(((mc / shape[1]) * ws[1] + (mc % shape[1]) * 4 + j) * taps + k);
      } else {  // q = rest * kq + t, tap 4t + j of the last axis
        const int64_t t = q % kq, rest = q / kq;
        if (4 * t + j < kw) v = w.get_int(rest * kw + 4 * t + j);
      }
      bits |= (static_cast<uint32_t>(v) & 0xffu) << (8 * j);
    }
    quads[i] = static_cast<int32_t>(bits);
  }
  return Tensor::from_ints(DType::Int32, shape, quads);
}

// Inputs as QLinearConv's: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void lower_qlinear_conv_dot4(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const Tensor* w = c.constant(3);
  const Tensor* zx = c.constant(2);
  const Tensor* bias = c.has_input(8) ? c.constant(8) : nullptr;
  const std::shared_ptr<const Tensor> sums = symmetric_weight_sums(c, 3, 5);
  const int64_t group = c.node().attr_int("group", 1);
  if (!w || !zx || zx->size() != 1 || !sums || (c.has_input(8) && !bias) || w->shape().size() < 3 ||
      (x->dtype != DType::Int8 && x->dtype != DType::UInt8) || w->dtype() != DType::Int8)
    c.fail("QLinearConvDot4 needs int8 symmetric constant weights, a constant scalar x_zero_point and a "
           "constant bias (the layout stage checks these)");
  const QuadAxis axis = w->shape()[1] % 4 == 0 ? QuadAxis::Channels : QuadAxis::KernelWidth;
  const DType i32 = DType::Int32;
  const int64_t shift = x->dtype == DType::Int8 ? 128 : 0;
  const nn::Window win = nn::forward_window(c.node(), spatial(x->shape), spatial(w->shape()), false);
  const size_t rank = win.rank(), last = rank - 1;
  TensorRef quads = packed_input(c, x, win, axis, zx->get_int(0), shift);
  auto wq_values = std::make_shared<const Tensor>(packed_weights(*w, axis));
  TensorRef wq = placeholder(c.name("weight_quads"), i32, wq_values->shape(), wq_values);
  const int64_t per_group_in = wq_values->shape()[1], per_group_out = w->shape()[0] / group;
  std::vector<int64_t> extents(wq_values->shape().begin() + 1, wq_values->shape().end());
  TensorRef sum = reduce(c.name("acc.sum"), "conv", i32, c.out_shape(0), Reducer::Sum, extents,
                         [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           const Expr& m = idx[1];
                           Expr in = group == 1 ? r[0] : floordiv(m, int_imm(per_group_out)) * per_group_in + r[0];
                           std::vector<Expr> xi{idx[0], in}, wi{m};
                           wi.insert(wi.end(), r.begin(), r.end());
                           for (size_t a = 0; a < rank; ++a) {
                             if (axis == QuadAxis::KernelWidth && a == last) {
                               xi.push_back(r[1 + a]);  // the tap quad, then the output column
                               xi.push_back(idx[2 + a]);
                             } else {
                               xi.push_back(idx[2 + a] * win.strides[a] + r[1 + a] * win.dilations[a]);
                             }
                           }
                           return dot4_u8s8(at(quads, xi), at(wq, wi));
                         });
  std::vector<int64_t> offset(static_cast<size_t>(sums->size()));
  for (int64_t m = 0; m < sums->size(); ++m)  // wrapped to int32 as the accumulator wraps
    offset[static_cast<size_t>(m)] =
        wrap_to_dtype((zx->get_int(0) + shift) * sums->get_int(m) - (bias ? bias->get_int(m) : 0), i32);
  TensorRef off = placeholder(c.name("zero_point_offset"), i32, sums->shape(),
                              std::make_shared<const Tensor>(Tensor::from_ints(i32, sums->shape(), offset)));
  TensorRef acc = compute(c.name("acc"), "elementwise", i32, sum->shape,
                          [&](const std::vector<Expr>& idx) { return at(sum, idx) - at(off, {idx[1]}); });
  c.set_output(0, requantized_conv_output(c, acc));
}

}  // namespace

void register_int8_dot_conv_lowering(LoweringRegistry& r) {
  r.add({"QLinearConvDot4", "kiln", lower_qlinear_conv_dot4});
}

}  // namespace kiln::te::nn_lower
