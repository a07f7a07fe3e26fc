// kiln.QLinearConvDot4 (frontend/layout/int8_dot_layout.h): a QLinearConv whose reduction runs four
// input channels at a time, one Dot4U8S8 per step, which a target with VNNI computes as one vpdpbusd
// lane (four multiply-adds instead of one vpmulld and one vpaddd per channel).
//
// Two operands of four bytes each:
// - the input, repacked by a stage of its own: element [n, q, y, x] holds channels 4q .. 4q+3 of
//   pixel (y, x), as unsigned bytes (int8 values plus 128; the instruction multiplies unsigned by
//   signed), padded with the zero point so the loop nest reads no bounds. One pass over the input,
//   as a float conv's padded copy is; the output stays NCHW, so its vectors run along the row as
//   every other int8 stage's do.
// - the weights, packed at compile time: [m, q, ky, kx] holds channels 4q .. 4q+3 of tap (ky, kx).
// sum (x - zx) * w = sum (x + s) * w - (zx + s) * sum w, with s = 128 for int8 inputs and 0 for
// uint8 ones: the second term and the bias are one int32 per output channel, as QLinearConv's
// symmetric-weight path computes them (nn_conv_lowering.cc), and padding taps, which read zx + s,
// add nothing. int32 arithmetic wraps in both, so the accumulator is the same integer.
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// The input as int32 quads of unsigned bytes, padded for window `win` with the zero point `zx`
// (returned window: no padding left). `shift` is 128 for int8 inputs, 0 for uint8.
std::pair<TensorRef, nn::Window> packed_input(const LowerContext& c, const TensorRef& x, nn::Window win, int64_t zx,
                                              int64_t shift) {
  Shape shape{x->shape[0], x->shape[1] / 4};
  for (size_t a = 0; a < win.rank(); ++a) shape.push_back((win.out[a] - 1) * win.strides[a] + win.span(a));
  const DType i32 = DType::Int32;
  TensorRef packed = compute(c.name("quads"), "pad", i32, shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> xi = idx;
    Expr inside;
    for (size_t a = 0; a < win.rank(); ++a) {
      xi[2 + a] = idx[2 + a] - win.pads_begin[a];
      inside = and_cond(inside, window_inside(win, a, x->shape[2 + a], xi[2 + a]));
    }
    Expr quad;
    for (int64_t j = 0; j < 4; ++j) {
      xi[1] = idx[1] * 4 + j;
      Expr byte = guarded(inside, cast(i32, at(x, xi)), int_imm(zx, i32)) + int_imm(shift, i32);
      if (j > 0) byte = binary(ExprOp::Shl, byte, int_imm(8 * j, i32));
      quad = quad ? binary(ExprOp::BitOr, quad, byte) : byte;
    }
    return quad;
  });
  win.pads_begin.assign(win.rank(), 0);
  win.pads_end.assign(win.rank(), 0);
  return {packed, win};
}

// The weights [M, C/group, K...] as int32 quads [M, C/(4 group), K...]: byte j of [m, q, k] is
// w[m, 4q + j, k], as the two's complement byte it is.
Tensor packed_weights(const Tensor& w) {
  const Shape& ws = w.shape();
  Shape shape = ws;
  shape[1] /= 4;
  const int64_t taps = num_elements(spatial(ws));
  std::vector<int64_t> quads(static_cast<size_t>(num_elements(shape)));
  for (int64_t m = 0; m < ws[0]; ++m)
    for (int64_t q = 0; q < shape[1]; ++q)
      for (int64_t k = 0; k < taps; ++k) {
        uint32_t bits = 0;
        for (int64_t j = 0; j < 4; ++j) {
          const int64_t v = w.get_int((m * ws[1] + q * 4 + j) * taps + k);
          bits |= (static_cast<uint32_t>(v) & 0xffu) << (8 * j);
        }
        quads[static_cast<size_t>((m * shape[1] + q) * taps + k)] = static_cast<int32_t>(bits);
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
  if (!w || !zx || zx->size() != 1 || !sums || (c.has_input(8) && !bias) || w->shape()[1] % 4 != 0 ||
      (x->dtype != DType::Int8 && x->dtype != DType::UInt8) || w->dtype() != DType::Int8)
    c.fail("QLinearConvDot4 needs int8 symmetric constant weights of whole quads of channels, a constant "
           "scalar x_zero_point and a constant bias (the layout stage checks these)");
  const DType i32 = DType::Int32;
  const int64_t shift = x->dtype == DType::Int8 ? 128 : 0;
  auto [quads, win] = packed_input(c, x, nn::forward_window(c.node(), spatial(x->shape), spatial(w->shape()), false),
                                   zx->get_int(0), shift);
  auto wq_values = std::make_shared<const Tensor>(packed_weights(*w));
  TensorRef wq = placeholder(c.name("weight_quads"), i32, wq_values->shape(), wq_values);
  const int64_t quads_per_group = w->shape()[1] / 4, per_group_out = w->shape()[0] / group;
  std::vector<int64_t> extents{quads_per_group};
  for (int64_t k : win.kernel) extents.push_back(k);
  TensorRef sum = reduce(c.name("acc.sum"), "conv", i32, c.out_shape(0), Reducer::Sum, extents,
                         [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           const Expr& m = idx[1];
                           Expr q = group == 1 ? r[0] : floordiv(m, int_imm(per_group_out)) * quads_per_group + r[0];
                           std::vector<Expr> xi{idx[0], q}, wi{m, r[0]};
                           for (size_t a = 0; a < win.rank(); ++a) {
                             xi.push_back(window_pos(win, a, idx[2 + a], r[1 + a]));
                             wi.push_back(r[1 + a]);
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
