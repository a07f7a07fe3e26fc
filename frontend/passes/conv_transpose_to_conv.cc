#include "frontend/passes/conv_transpose_to_conv.h"

#include <optional>

#include "frontend/ops/nn_common.h"

namespace kiln {
namespace {

// The phase split of one ConvTranspose (see the header), per spatial axis a: output position
// o = u - pads_begin with u = q * stride + r is phase r of row q. The Conv computes rows
// q_lo .. q_lo + rows - 1 of every phase; the interleave puts row q of phase r at q * stride + r -
// q_lo * stride, so the output starts `crop` positions into it.
struct PhaseSplit {
  int64_t stride = 1;
  std::vector<int64_t> taps;  // M = ceil(K / stride) per axis
  std::vector<int64_t> pads_begin, pads_end, rows, crop;
};

std::optional<PhaseSplit> phase_split(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  const nn::Window win = nn::conv_transpose_window(n, x.shape, g.constant_input(n, 1)->shape());
  const size_t rank = win.rank();
  PhaseSplit p;
  p.stride = win.strides[0];
  for (size_t a = 0; a < rank; ++a)
    if (win.dilations[a] != 1 || win.strides[a] != p.stride) return std::nullopt;
  if (p.stride > 1 && rank != 2) return std::nullopt;  // DepthToSpace interleaves two axes
  const int64_t s = p.stride;
  for (size_t a = 0; a < rank; ++a) {
    const int64_t m = (win.kernel[a] + s - 1) / s, in = x.shape[a + 2];
    // Phase row q reads input q - (m - 1) .. q: the Conv pads m - 1 - q_lo before the input and
    // whatever the last row needs after it.
    const int64_t q_lo = nn::floor_div(win.pads_begin[a], s);
    const int64_t q_hi = nn::floor_div(win.pads_begin[a] + win.out[a] - 1, s);
    const int64_t before = m - 1 - q_lo, rows = q_hi - q_lo + 1;
    const int64_t after = rows - in - before + m - 1;
    if (before < 0 || after < 0) return std::nullopt;  // the Conv cannot start inside its input
    p.taps.push_back(m);
    p.pads_begin.push_back(before);
    p.pads_end.push_back(after);
    p.rows.push_back(rows);
    p.crop.push_back(win.pads_begin[a] - q_lo * s);
  }
  return p;
}

// One phase of the exact split (see the header): the output positions o = Q * stride + rho[a] along
// every axis a, a Conv over the input with taps[a] taps and these pads, out[a] / stride rows each.
// Along axis a it uses the ConvTranspose taps k = r[a] + stride * m, r[a] = (rho[a] + pads_begin) mod
// stride, reading input Q + off - m with off = (rho[a] + pads_begin) div stride.
struct ExactPhase {
  std::vector<int64_t> r, taps, pads_begin, pads_end;
};

// The exact split of a strided 2-D ConvTranspose, when every phase has the same number of output rows
// (stride divides the output) and its Conv needs no negative pad; else none.
std::optional<std::vector<ExactPhase>> exact_phases(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  const nn::Window win = nn::conv_transpose_window(n, x.shape, g.constant_input(n, 1)->shape());
  if (win.rank() != 2) return std::nullopt;
  const int64_t s = win.strides[0];
  if (s < 2) return std::nullopt;
  struct AxisPhase {  // one axis's part of a phase
    int64_t r, taps, before, after;
  };
  std::vector<AxisPhase> per_axis[2];  // per axis, per rho
  for (size_t a = 0; a < 2; ++a) {
    if (win.dilations[a] != 1 || win.strides[a] != s || win.out[a] % s != 0) return std::nullopt;
    const int64_t in = x.shape[a + 2], rows = win.out[a] / s;
    for (int64_t rho = 0; rho < s; ++rho) {
      const int64_t v = rho + win.pads_begin[a], off = nn::floor_div(v, s), r = v - off * s;
      const int64_t m = nn::ceil_div(win.kernel[a] - r, s);
      const int64_t before = m - 1 - off, after = rows - 1 + off - (in - 1);
      if (m < 1 || before < 0 || after < 0) return std::nullopt;
      per_axis[a].push_back({r, m, before, after});
    }
  }
  std::vector<ExactPhase> phases;  // row-major in (rho_h, rho_w): DepthToSpace DCR's channel order
  for (const AxisPhase& h : per_axis[0])
    for (const AxisPhase& w : per_axis[1])
      phases.push_back({{h.r, w.r}, {h.taps, w.taps}, {h.before, w.before}, {h.after, w.after}});
  return phases;
}

// Whether the single Conv's shared row grid computes enough rows that no output keeps (each phase
// needs out / stride rows, the grid has the union of their ranges) for the exact split to pay for its
// stride^2 Convs: at least 1/8 more. dcgan's 4x4 -> 8x8 layer computes 25 rows per phase for 16
// (1.56x), 8 -> 16 1.27x, 16 -> 32 1.13x, 32 -> 64 1.06x.
bool exact_split_pays(const PhaseSplit& shared, const Shape& y) {
  const int64_t needed = (y[2] / shared.stride) * (y[3] / shared.stride);
  return shared.rows[0] * shared.rows[1] * 8 >= needed * 9;
}

bool rewritable(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op_type != "ConvTranspose" || n.outputs.size() != 1 || n.inputs.size() < 2) return false;
  const Value& x = g.value(n.inputs[0]);
  const Tensor* w = g.constant_input(n, 1);
  if (!x.typed || !is_float(x.dtype) || x.shape.size() < 3 || !w || w->dtype() != x.dtype) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor* b = g.constant_input(n, 2);
    if (!b || b->dtype() != x.dtype) return false;
  }
  return g.value(n.outputs[0]).typed;
}

// The Conv's weight: output channel c * P + phase (P = stride^rank phases, the phase's offsets r
// row-major), kernel tap t along axis a = ConvTranspose tap r[a] + stride * (M[a] - 1 - t): the
// correlation runs the phase's taps backwards. Taps past the kernel are zero.
Tensor phase_weights(const Tensor& w, int64_t group, const PhaseSplit& p) {
  const Shape& ws = w.shape();
  const size_t rank = ws.size() - 2;
  const int64_t in_per_group = ws[0] / group, out_per_group = ws[1], s = p.stride;
  int64_t phases = 1;
  for (size_t a = 0; a < rank; ++a) phases *= s;
  Shape cs{ws[1] * group * phases, in_per_group};
  cs.insert(cs.end(), p.taps.begin(), p.taps.end());
  Tensor out(w.dtype(), cs);
  std::vector<int64_t> r(rank), t(rank);
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t rest = i;
    for (size_t a = rank; a-- > 0;) {
      t[a] = rest % p.taps[a];
      rest /= p.taps[a];
    }
    const int64_t ci = rest % in_per_group, oc = rest / in_per_group;
    int64_t phase = oc % phases;
    for (size_t a = rank; a-- > 0;) {
      r[a] = phase % s;
      phase /= s;
    }
    const int64_t channel = oc / phases, gi = channel / out_per_group, j = channel % out_per_group;
    int64_t src = (gi * in_per_group + ci) * ws[1] + j;
    bool inside = true;
    for (size_t a = 0; a < rank; ++a) {
      const int64_t k = r[a] + s * (p.taps[a] - 1 - t[a]);
      inside &= k < ws[a + 2];
      src = src * ws[a + 2] + k;
    }
    out.set_double(i, inside ? w.get_double(src) : 0.0);
  }
  return out;
}

// The Conv weight of one exact phase: [out channels, in channels per group, taps...], tap t along axis
// a = ConvTranspose tap r[a] + stride * (taps[a] - 1 - t), always inside the kernel.
Tensor exact_phase_weights(const Tensor& w, int64_t group, int64_t s, const ExactPhase& p) {
  const Shape& ws = w.shape();
  const int64_t in_per_group = ws[0] / group, out_per_group = ws[1];
  Tensor out(w.dtype(), {ws[1] * group, in_per_group, p.taps[0], p.taps[1]});
  for (int64_t i = 0; i < out.size(); ++i) {
    const int64_t tw = i % p.taps[1], th = (i / p.taps[1]) % p.taps[0];
    const int64_t ci = (i / (p.taps[0] * p.taps[1])) % in_per_group, oc = i / (p.taps[0] * p.taps[1] * in_per_group);
    const int64_t gi = oc / out_per_group, j = oc % out_per_group;
    const int64_t kh = p.r[0] + s * (p.taps[0] - 1 - th), kw = p.r[1] + s * (p.taps[1] - 1 - tw);
    out.set_double(i, w.get_double((((gi * in_per_group + ci) * ws[1] + j) * ws[2] + kh) * ws[3] + kw));
  }
  return out;
}

Tensor repeated_bias(const Tensor& b, int64_t phases) {
  Tensor out(b.dtype(), {b.size() * phases});
  for (int64_t i = 0; i < out.size(); ++i) out.set_double(i, b.get_double(i / phases));
  return out;
}

Node make_node(const std::string& op, const std::string& name, int64_t opset, std::vector<std::string> ins,
               std::vector<std::string> outs) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.opset = opset;
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

Tensor int64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v);
}

// The nodes that replace ConvTranspose `n` by its exact split: a Conv per phase, their Concat along
// channels in DCR order, and DepthToSpace (DCR) into the output.
std::vector<Node> rewrite_exact(Graph& g, const Node& n, int64_t s, const std::vector<ExactPhase>& phases) {
  const Value& x = g.value(n.inputs[0]);
  const Shape y = g.value(n.outputs[0]).shape;
  const int64_t group = n.attr_int("group", 1);
  const bool bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  std::vector<Node> out;
  std::vector<std::string> parts;
  for (size_t k = 0; k < phases.size(); ++k) {
    const ExactPhase& p = phases[k];
    const std::string tag = ".phase" + std::to_string(k);
    std::vector<std::string> conv_in{n.inputs[0],
                                     g.add_constant(n.name + tag + "_weight", exact_phase_weights(*g.constant_input(n, 1), group, s, p))};
    if (bias) conv_in.push_back(n.inputs[2]);
    parts.push_back(g.add_value(n.outputs[0] + tag, x.dtype, {x.shape[0], y[1], y[2] / s, y[3] / s}));
    Node conv = make_node("Conv", n.name + tag, 11, conv_in, {parts.back()});
    conv.attrs["pads"] = AttrValue(std::vector<int64_t>{p.pads_begin[0], p.pads_begin[1], p.pads_end[0], p.pads_end[1]});
    conv.attrs["group"] = AttrValue(group);
    out.push_back(std::move(conv));
  }
  const std::string phased = g.add_value(n.outputs[0] + ".phases", x.dtype, {x.shape[0], y[1] * s * s, y[2] / s, y[3] / s});
  Node concat = make_node("Concat", n.name + ".phases", 13, parts, {phased});
  concat.attrs["axis"] = AttrValue(int64_t{1});
  out.push_back(std::move(concat));
  Node d2s = make_node("DepthToSpace", n.name + ".interleave", 13, {phased}, {n.outputs[0]});
  d2s.attrs["blocksize"] = AttrValue(s);
  d2s.attrs["mode"] = AttrValue(std::string("DCR"));
  out.push_back(std::move(d2s));
  return out;
}

// The nodes that replace ConvTranspose `n`: Conv, then for a strided one DepthToSpace and, when the
// pads crop the interleaved grid, Slice.
std::vector<Node> rewrite(Graph& g, const Node& n, const PhaseSplit& p) {
  const Value& x = g.value(n.inputs[0]);
  const Tensor* bias = g.constant_input(n, 2);
  const Shape y = g.value(n.outputs[0]).shape;
  const int64_t group = n.attr_int("group", 1), s = p.stride, phases = s * s;

  std::vector<std::string> conv_in{n.inputs[0],
                                   g.add_constant(n.name + ".phase_weight", phase_weights(*g.constant_input(n, 1), group, p))};
  if (bias) conv_in.push_back(s == 1 ? n.inputs[2] : g.add_constant(n.name + ".phase_bias", repeated_bias(*bias, phases)));
  const std::string phased =
      s == 1 ? n.outputs[0] : g.add_value(n.outputs[0] + ".phases", x.dtype, {x.shape[0], y[1] * phases, p.rows[0], p.rows[1]});
  Node conv = make_node("Conv", n.name, 11, conv_in, {phased});
  std::vector<int64_t> pads = p.pads_begin;
  pads.insert(pads.end(), p.pads_end.begin(), p.pads_end.end());
  conv.attrs["pads"] = AttrValue(pads);
  conv.attrs["group"] = AttrValue(group);
  std::vector<Node> out{std::move(conv)};
  if (s == 1) return out;  // every row is an output row: nothing to interleave or crop

  const Shape grid{x.shape[0], y[1], p.rows[0] * s, p.rows[1] * s};
  const bool cropped = grid != y;
  const std::string interleaved = cropped ? g.add_value(n.outputs[0] + ".interleaved", x.dtype, grid) : n.outputs[0];
  Node d2s = make_node("DepthToSpace", n.name + ".interleave", 13, {phased}, {interleaved});
  d2s.attrs["blocksize"] = AttrValue(s);
  d2s.attrs["mode"] = AttrValue(std::string("CRD"));
  out.push_back(std::move(d2s));
  if (cropped) {
    const std::vector<int64_t> ends{p.crop[0] + y[2], p.crop[1] + y[3]};
    out.push_back(make_node("Slice", n.name + ".crop", 13,
                            {interleaved, g.add_constant(n.name + ".crop_starts", int64_vector(p.crop)),
                             g.add_constant(n.name + ".crop_ends", int64_vector(ends)),
                             g.add_constant(n.name + ".crop_axes", int64_vector({2, 3}))},
                            {n.outputs[0]}));
  }
  return out;
}

}  // namespace

int conv_transpose_to_conv(Graph& g) {
  std::vector<Node> nodes;
  int rewritten = 0;
  for (Node& n : g.nodes) {
    std::optional<PhaseSplit> p;
    if (rewritable(g, n)) p = phase_split(g, n);
    if (!p) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::optional<std::vector<ExactPhase>> exact;
    if (p->stride > 1 && exact_split_pays(*p, g.value(n.outputs[0]).shape)) exact = exact_phases(g, n);
    for (Node& r : exact ? rewrite_exact(g, n, p->stride, *exact) : rewrite(g, n, *p)) {
      r.guards = n.guards;
      nodes.push_back(std::move(r));
    }
    ++rewritten;
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace kiln
