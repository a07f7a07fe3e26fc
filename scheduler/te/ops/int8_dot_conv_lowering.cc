// kiln.QLinearConvDot4 (frontend/layout/int8_dot_layout.h): a QLinearConv whose reduction runs four
// input channels, or four taps of a kernel row, at a time, one Dot4U8S8 per step, which a target
// with VNNI computes as one vpdpbusd lane (four multiply-adds instead of a vpmulld and a vpaddd each).
//
// Two operands of four bytes each:
// - the input, repacked by a stage of its own: element [n, q, y, x] holds channels 4q .. 4q+3 of
//   pixel (y, x), or [n, c, y, t, x] the four pixels under taps 4t .. 4t+3 of output column x, as
//   unsigned bytes (int8 values plus 128; the instruction multiplies unsigned by signed), padded
//   with the zero point so the loop nest reads no bounds. One pass over the input (four for tap
//   quads), as a float conv's padded copy is. Without an output block (below) the output is NCHW
//   and its vectors run along the row.
// - the weights, packed at compile time the same way (taps past the kernel's end weigh 0).
// sum (x - zx) * w = sum (x + s) * w - (zx + s) * sum w, with s = 128 for int8 inputs and 0 for
// uint8 ones: the second term and the bias are one int32 per output channel, as QLinearConv's
// symmetric-weight path computes them (nn_conv_lowering.cc), and padding taps, which read zx + s,
// add nothing. int32 arithmetic wraps in both, so the accumulator is the same integer.
#include "scheduler/te/ops/dot4_form.h"
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// How a conv's reduction is cut into quads: four input channels (whole quads of them in each group),
// or else four taps along the kernel's last axis (depthwise convs, DS-CNN's one-channel input),
// zero-weighted past its end.
enum class QuadAxis { Channels, KernelWidth };

// The packed operands' geometry. Input dims: [N, C', KQ?, phases..., rows..., OW?]:
// - C' is C/4 (channel quads) or C; KQ (tap quads of the last axis) and OW (its output columns)
//   only for KernelWidth, where byte j of [.., kq, .., ow] is the input under tap 4kq + j of output
//   column ow;
// - every other spatial axis a is its padded extent P, or, when it is strided (stride s > 1,
//   dilation 1), s phases and ceil(P / s) rows: padded position q * s + phase. Output position o
//   and tap k = kq' * s + phase then read row o + kq', so consecutive outputs read consecutive rows
//   and the reduction's vectors run along whole output rows of a strided conv too (DS-CNN's conv1:
//   rows of 5 merged into 125 outputs instead of 25 vectors of 4 and a scalar).
// Weight dims: [M, C'/group, KQ? (last), per other axis: K, or ceil(K / s) and s]; taps past a
// kernel's end (kq' * s + phase >= K, or 4kq + j >= K) weigh 0.
// An input in channel blocks (QLinearConvBlocked) keeps them: C' is its blocks and a last dim
// of `lanes` quads a block follows the rows, in the input and in the reduction (and the weights)
// alike, so packing copies runs of whole blocks and the reduction reads a block's quads in order.
struct QuadGeometry {
  QuadAxis axis;
  nn::Window win;
  size_t rank;
  std::vector<bool> phased;  // per spatial axis
  int64_t lanes = 0;         // quads per channel block of a blocked input; 0 for NCHW

  QuadGeometry(QuadAxis a, nn::Window w, int64_t block = 0)
      : axis(a), win(std::move(w)), rank(win.rank()), phased(rank, false), lanes(block / 4) {
    for (size_t i = 0; i < rank; ++i)
      phased[i] = !quad(i) && win.strides[i] > 1 && win.dilations[i] == 1;
  }
  bool quad(size_t a) const { return axis == QuadAxis::KernelWidth && a == rank - 1; }
  int64_t tap_quads() const { return (win.kernel[rank - 1] + 3) / 4; }
  int64_t padded(size_t a) const { return (win.out[a] - 1) * win.strides[a] + win.span(a); }
  int64_t rows(size_t a) const { return phased[a] ? (padded(a) + win.strides[a] - 1) / win.strides[a] : padded(a); }
  int64_t tap_rows(size_t a) const { return phased[a] ? (win.kernel[a] + win.strides[a] - 1) / win.strides[a] : win.kernel[a]; }

  Shape input_shape(int64_t n, int64_t channels) const {
    Shape s{n, lanes ? (channels + 4 * lanes - 1) / (4 * lanes) : axis == QuadAxis::Channels ? channels / 4 : channels};
    if (axis == QuadAxis::KernelWidth) s.push_back(tap_quads());
    for (size_t a = 0; a < rank; ++a)
      if (phased[a]) s.push_back(win.strides[a]);
    for (size_t a = 0; a < rank; ++a)
      if (!quad(a)) s.push_back(rows(a));
    if (axis == QuadAxis::KernelWidth) s.push_back(win.out[rank - 1]);
    if (lanes) s.push_back(lanes);
    return s;
  }
  // The reduction's extents after the channel: the weight dims after [M, C'].
  std::vector<int64_t> tap_extents() const {
    std::vector<int64_t> e;
    for (size_t a = 0; a < rank; ++a) {
      if (quad(a)) {
        e.push_back(tap_quads());
        continue;
      }
      e.push_back(tap_rows(a));
      if (phased[a]) e.push_back(win.strides[a]);
    }
    if (lanes) e.push_back(lanes);
    return e;
  }
  // The input channel of byte j of the quad at [c', ..., lane?] of the packed input (or weights).
  int64_t channel(int64_t c_quad, int64_t lane, int64_t j) const {
    return axis == QuadAxis::KernelWidth ? c_quad : (lanes ? c_quad * lanes + lane : c_quad) * 4 + j;
  }
};

// The input as int32 quads of bytes (int8_dot_layout.h) in QuadGeometry's dims, padded with the zero
// point `zx`, each byte shifted as `form` says (dot4_form.h).
// x is NCHW, or blocked (N x C/b x spatial... x b) when g.lanes says so, of `channels` channels.
TensorRef packed_input(const LowerContext& c, const TensorRef& x, int64_t channels, const QuadGeometry& g, int64_t zx,
                       const Dot4Form& form) {
  const DType i32 = DType::Int32;
  const nn::Window& win = g.win;
  return compute(c.name("quads"), "pad", i32, g.input_shape(x->shape[0], channels), [&](const std::vector<Expr>& idx) {
    // Unpack the dims: [n, c', kq?, phases..., rows..., ow?].
    size_t d = 2;
    Expr kq = g.axis == QuadAxis::KernelWidth ? idx[d++] : nullptr;
    std::vector<Expr> phase(g.rank), row(g.rank);
    for (size_t a = 0; a < g.rank; ++a)
      if (g.phased[a]) phase[a] = idx[d++];
    for (size_t a = 0; a < g.rank; ++a)
      if (!g.quad(a)) row[a] = idx[d++];
    Expr column = g.axis == QuadAxis::KernelWidth ? idx[d++] : nullptr;
    return byte_quad([&](int64_t j) {
      std::vector<Expr> xi{idx[0], g.lanes ? idx[1] : g.axis == QuadAxis::Channels ? idx[1] * 4 + j : idx[1]};
      Expr inside;
      for (size_t a = 0; a < g.rank; ++a) {
        Expr pos = g.phased[a] ? row[a] * win.strides[a] + phase[a] : row[a];  // a padded position
        if (g.quad(a)) {
          Expr k = kq * 4 + j;  // tap 4kq + j
          if (win.kernel[a] % 4 != 0) inside = and_cond(inside, k < int_imm(win.kernel[a]));
          pos = column * win.strides[a] + k * win.dilations[a];
        }
        Expr at_x = pos - win.pads_begin[a];
        inside = and_cond(inside, window_inside(win, a, x->shape[2 + a], at_x));
        xi.push_back(at_x);
      }
      if (g.lanes) xi.push_back(idx.back() * 4 + j);  // a padded channel's code weighs 0
      return form.byte(guarded(inside, cast(i32, at(x, xi)), int_imm(zx, i32)) + int_imm(form.shift, i32));
    });
  });
}

// The weights [M, C/group, K...] as int32 quads in QuadGeometry's weight dims, `rows` output channels
// (those past M, a blocked accumulator's padding, weigh 0). Byte j is the weight's two's complement
// byte.
Tensor packed_weights(const Tensor& w, const QuadGeometry& g, int64_t rows) {
  const Shape& ws = w.shape();
  Shape shape{rows, g.lanes ? (ws[1] + 4 * g.lanes - 1) / (4 * g.lanes) : g.axis == QuadAxis::Channels ? ws[1] / 4 : ws[1]};
  const std::vector<int64_t> taps = g.tap_extents();
  shape.insert(shape.end(), taps.begin(), taps.end());
  std::vector<int64_t> quads(static_cast<size_t>(num_elements(shape)));
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t i = 0; i < quads.size(); ++i, nn::next_index(idx, shape))
    quads[i] = byte_quad_bits([&](int64_t j) -> int64_t {
      // The weight's own index [m, c, k...]; a padding tap past the kernel's end weighs 0.
      const int64_t channel = g.channel(idx[1], g.lanes ? idx.back() : 0, j);
      if (idx[0] >= ws[0] || channel >= ws[1]) return 0;
      std::vector<int64_t> wi{idx[0], channel};
      size_t d = 2;
      for (size_t a = 0; a < g.rank; ++a) {
        int64_t k = 0;
        if (g.quad(a)) {
          k = idx[d++] * 4 + j;
        } else if (g.phased[a]) {
          k = idx[d] * g.win.strides[a] + idx[d + 1];
          d += 2;
        } else {
          k = idx[d++];
        }
        if (k >= ws[2 + a]) return 0;
        wi.push_back(k);
      }
      int64_t flat = 0;
      for (size_t a = 0; a < wi.size(); ++a) flat = flat * ws[a] + wi[a];
      return w.get_int(flat);
    });
  return Tensor::from_ints(DType::Int32, shape, quads);
}

// `t` [M, rest...] as [M / block, rest..., block]: a block of output channels' weights for one
// reduction step is one run of memory, the vector the blocked accumulator reads.
Tensor in_row_blocks(const Tensor& t, int64_t block) {
  const Shape& s = t.shape();
  const int64_t rest = t.size() / s[0];
  Shape shape{s[0] / block};
  shape.insert(shape.end(), s.begin() + 1, s.end());
  shape.push_back(block);
  std::vector<int64_t> v(static_cast<size_t>(t.size()));
  for (int64_t m = 0; m < s[0]; ++m)
    for (int64_t k = 0; k < rest; ++k) v[static_cast<size_t>(((m / block) * rest + k) * block + m % block)] = t.get_int(m * rest + k);
  return Tensor::from_ints(t.dtype(), shape, v);
}

// Where the reduction reads the input quads for output position `out` (spatial, one per axis) of
// batch `n` and input quad `in`, at reduction index r = [c', then per axis: kq | k | k', phase]; the
// input dims are [n, c', kq?, phases..., rows..., ow?] (QuadGeometry).
std::vector<Expr> input_quad_index(const QuadGeometry& geo, const Expr& n, const Expr& in, const std::vector<Expr>& out,
                                   const std::vector<Expr>& r) {
  std::vector<Expr> kq_dim, phases, rows, column;
  size_t d = 1;
  for (size_t a = 0; a < geo.rank; ++a) {
    const Expr& o = out[a];
    if (geo.quad(a)) {
      kq_dim.push_back(r[d++]);
      column.push_back(o);
    } else if (geo.phased[a]) {
      rows.push_back(o + r[d]);
      phases.push_back(r[d + 1]);
      d += 2;
    } else {
      rows.push_back(o * geo.win.strides[a] + r[d++] * geo.win.dilations[a]);
    }
  }
  std::vector<Expr> xi{n, in};
  for (const auto* part : {&kq_dim, &phases, &rows, &column}) xi.insert(xi.end(), part->begin(), part->end());
  if (geo.lanes) xi.push_back(r.back());
  return xi;
}

// Inputs as QLinearConv's: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
//
// With the attribute `block` (the layout stage sets it to the target's int32 lanes per vector) a conv
// over channel quads accumulates in blocks of output channels, N x M/block x spatial... x block: the
// vector is a block of output channels, each step one broadcast input quad against a vector of
// weight quads (vpdpbusd with a broadcast operand), whatever the image's width; in NCHW the vector
// runs along an output row, and a row of 13 or 27 is pieces of 16, 8, 2 and 1 lanes. The output is
// requantized in the blocks, as the accumulators are stored, and then reordered to NCHW, one byte an
// element: its readers see the op's own layout.
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
  const Dot4Form form = dot4_form(c.node(), x->dtype);
  // QLinearConvBlocked reads and writes blocks (block_layout.h); QLinearConvDot4 NCHW.
  const bool blocked_io = c.node().op_type == "QLinearConvBlocked";
  const bool blocked_in = blocked_io && c.node().attr_int("nchw_input", 0) == 0;
  const Shape x_spatial = blocked_in ? Shape(x->shape.begin() + 2, x->shape.end() - 1) : spatial(x->shape);
  const QuadGeometry geo(axis, nn::forward_window(c.node(), x_spatial, spatial(w->shape()), false),
                         blocked_in ? c.node().attr_int("block", 1) : 0);
  const Shape& out_shape = c.out_shape(0);
  const int64_t block = c.node().attr_int("block", 1), channels = w->shape()[0];
  const bool blocked = blocked_io || (block > 1 && group == 1);
  if (blocked_io && (group != 1 || (blocked_in && (axis != QuadAxis::Channels || block % 4 != 0))))
    c.fail("QLinearConvBlocked needs one group and, on a blocked input, whole channel quads and a block of whole quads");
  const ChannelLayout layout = blocked ? ChannelLayout::blocked(channels, block) : ChannelLayout::nchw(channels);
  Shape acc_shape = out_shape;
  if (blocked && !blocked_io) {
    acc_shape[1] = layout.channels / block;
    acc_shape.push_back(block);
  }
  TensorRef quads = packed_input(c, x, w->shape()[1] * group, geo, zx->get_int(0), form);
  const Tensor rows = packed_weights(*w, geo, layout.channels);
  auto wq_values = std::make_shared<const Tensor>(blocked ? in_row_blocks(rows, block) : rows);
  TensorRef wq = placeholder(c.name("weight_quads"), i32, wq_values->shape(), wq_values);
  const int64_t per_group_in = rows.shape()[1], per_group_out = channels / group;
  std::vector<int64_t> extents(rows.shape().begin() + 1, rows.shape().end());
  TensorRef sum = reduce(c.name("acc.sum"), "conv", i32, acc_shape, Reducer::Sum, extents,
                         [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                           const Expr m = layout.channel(idx);
                           Expr in = group == 1 ? r[0] : floordiv(m, int_imm(per_group_out)) * per_group_in + r[0];
                           std::vector<Expr> wi{blocked ? idx[1] : m};
                           wi.insert(wi.end(), r.begin(), r.end());
                           if (blocked) wi.push_back(idx.back());
                           const std::vector<Expr> out(idx.begin() + 2, idx.begin() + 2 + static_cast<std::ptrdiff_t>(geo.rank));
                           return form.dot(at(quads, input_quad_index(geo, idx[0], in, out, r)), at(wq, wi));
                         });
  TensorRef acc = minus_channel_constants(c, c.name("acc"), sum, zx->get_int(0) + form.shift, *sums, bias, layout);
  if (!blocked || blocked_io) {
    c.set_output(0, requantized_conv_output(c, acc, c.name(), layout));
    return;
  }
  c.set_output(0, from_blocks(c.name(), requantized_conv_output(c, acc, c.name("blocks"), layout), out_shape));
}

}  // namespace

void register_int8_dot_conv_lowering(LoweringRegistry& r) {
  r.add({"QLinearConvDot4", "kiln", lower_qlinear_conv_dot4});
  r.add({"QLinearConvBlocked", "kiln", [](LowerContext& c) {
           if (c.node().attr_int("group", 1) != 1)
             lower_qlinear_depthwise_blocked(c);
           else
             lower_qlinear_conv_dot4(c);
         }});
}

}  // namespace kiln::te::nn_lower
