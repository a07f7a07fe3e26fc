// Pooling as tensor expressions: MaxPool (with its Indices output), AveragePool, LpPool, their
// Global* forms, and MaxUnpool.
//
// A pool is a reduction over the kernel taps. A window that leaves the input reads a padded copy of
// it (a stage of its own, as Conv does), the padding holding the reducer's identity: with a select
// per tap, yolox_nano's 13 x 13 SPP max pool (6 of padding) took 332 us, and with the copy it left
// the model's 8 largest loops (all over 45 us; bench/RESULTS.md, issue 17 step 12). Window sizes (AveragePool's divisor) are index arithmetic on the output position
// (on the window as given, padding included), folded to a constant when every window has the same
// size. MaxPool's Indices keep the per-tap bounds check (their positions are the input's).
#include <cmath>
#include <limits>

#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

Shape spatial_of(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// kiln.MaxPoolBlocked and kiln.AveragePoolBlocked pool N x C/b x S... x b: the channel within its
// block is one more trailing axis that every tap keeps.
bool blocked(const LowerContext& c) { return c.node().domain == "kiln"; }

// The spatial extents of pool input or output shape s.
Shape pool_spatial(const LowerContext& c, const Shape& s) {
  return blocked(c) ? Shape(s.begin() + 2, s.end() - 1) : spatial_of(s);
}

nn::Window pool_window(const LowerContext& c) {
  return nn::forward_window(c.node(), pool_spatial(c, c.shape(0)), c.node().required_ints("kernel_shape"), true);
}

// The input element one kernel tap of the window at output idx reads, and whether it lies inside the
// input (null: always).
struct Tap {
  std::vector<Expr> index;
  Expr inside;
};

Tap pool_tap(const nn::Window& w, const Shape& x_shape, const std::vector<Expr>& idx, const std::vector<Expr>& r) {
  Tap t;
  t.index = {idx[0], idx[1]};
  for (size_t a = 0; a < w.rank(); ++a) {
    Expr pos = window_pos(w, a, idx[2 + a], r[a]);
    t.inside = and_cond(t.inside, window_inside(w, a, x_shape[2 + a], pos));
    t.index.push_back(pos);
  }
  if (idx.size() > 2 + w.rank()) t.index.push_back(idx.back());  // a blocked pool's channel in its block
  return t;
}

// Product of Int64 index expressions, folding immediates.
Expr product(const Expr& a, const Expr& b) {
  if (a->op == ExprOp::IntImm && b->op == ExprOp::IntImm) return int_imm(a->int_value * b->int_value);
  return a * b;
}

// How many taps of the window at output idx read positions in [lo_a, hi_a) on every axis.
Expr window_count(const nn::Window& w, const std::vector<Expr>& idx, const std::vector<int64_t>& lo,
                  const std::vector<int64_t>& hi) {
  Expr n = int_imm(1);
  for (size_t a = 0; a < w.rank(); ++a) n = product(n, window_tap_count(w, a, idx[2 + a], lo[a], hi[a]));
  return n;
}

// Whether some window along axis a lies entirely in the padding (only ceil_mode or pads as large as
// the kernel make one).
bool axis_has_empty_window(const nn::Window& w, size_t a, int64_t extent) {
  for (int64_t o = 0; o < w.out[a]; ++o)
    if (window_tap_count_at(w, a, o, 0, extent) == 0) return true;
  return false;
}

bool has_empty_window(const nn::Window& w, const Shape& in_spatial) {
  for (size_t a = 0; a < w.rank(); ++a)
    if (axis_has_empty_window(w, a, in_spatial[a])) return true;
  return false;
}

// The condition that the window at output idx reads at least one input element; null when all do.
Expr window_nonempty(const nn::Window& w, const Shape& in_spatial, const std::vector<Expr>& idx) {
  Expr cond;
  for (size_t a = 0; a < w.rank(); ++a)
    if (axis_has_empty_window(w, a, in_spatial[a]))
      cond = and_cond(cond, window_tap_count(w, a, idx[2 + a], 0, in_spatial[a]) > int_imm(0));
  return cond;
}

// ---- MaxPool ----------------------------------------------------------------------------------

// Indices: the flat position (in the whole input, row-major or, with storage_order 1, column-major
// within the plane) of the first maximum of each window, -1 for a window entirely in the padding.
TensorRef max_pool_indices(const LowerContext& c, const nn::Window& w, const TensorRef& maxv) {
  const TensorRef& x = c.input(0);
  Shape in_spatial = spatial_of(x->shape);
  std::vector<int64_t> row_strides = strides_of(in_spatial);
  const int64_t none = std::numeric_limits<int64_t>::max();
  // Taps run in row-major kernel order and positions grow with the tap, so the first maximum is the
  // one with the smallest row-major in-plane offset.
  TensorRef first = reduce(c.name("argmax"), "pool", DType::Int64, c.out_shape(1), Reducer::Min, w.kernel,
                           [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                             Tap t = pool_tap(w, x->shape, idx, r);
                             Expr offset = int_imm(0);
                             for (size_t a = 0; a < w.rank(); ++a) offset = offset + t.index[2 + a] * row_strides[a];
                             // The tap is read under a select on `inside`, so a padding tap's position
                             // (outside x) is never read: in a condition it would be (both operands of
                             // && are evaluated), and codegen clamps only loads under a select.
                             Expr tap = t.inside ? select(t.inside, at(x, t.index), const_of(x->dtype, 0)) : at(x, t.index);
                             Expr is_max = and_cond(t.inside, eq(tap, at(maxv, idx)));
                             return select(is_max, offset, int_imm(none));
                           });
  bool column_major = c.node().attr_int("storage_order", 0) == 1;
  int64_t plane = num_elements(in_spatial);
  return compute(c.name("indices"), "injective", DType::Int64, c.out_shape(1), [&](const std::vector<Expr>& idx) {
    Expr offset = at(first, idx);
    Expr in_plane = offset;
    if (column_major) {
      std::vector<Expr> pos = unravel(offset, in_spatial);
      in_plane = int_imm(0);
      int64_t stride = 1;  // the first spatial axis varies fastest
      for (size_t a = 0; a < pos.size(); ++a) {
        in_plane = in_plane + pos[a] * stride;
        stride *= in_spatial[a];
      }
    }
    Expr flat = (idx[0] * x->shape[1] + idx[1]) * plane + in_plane;
    return select(eq(offset, int_imm(none)), int_imm(-1), flat);
  });
}

// The input a pool's taps read, and the window over it: x itself, or when some window leaves x, a
// copy padded with `fill` that every window stays inside.
std::pair<TensorRef, nn::Window> pool_input(const LowerContext& c, const nn::Window& w, const Expr& fill) {
  const TensorRef& x = c.input(0);
  if (!window_leaves(w, pool_spatial(c, x->shape))) return {x, w};
  return padded_with(c, x, w, fill);
}

void lower_max_pool(LowerContext& c) {
  const TensorRef& x = c.input(0);
  nn::Window w = pool_window(c);
  DType t = x->dtype;
  // Max needs no arithmetic, so it runs in the input dtype (half precision and int8 included).
  const Shape in_spatial = pool_spatial(c, x->shape);
  bool has_empty = has_empty_window(w, in_spatial);
  const auto [xp, wp] = pool_input(c, w, reducer_identity(Reducer::Max, t));
  TensorRef maxv = reduce(has_empty ? c.name("max") : c.name(), "pool", t, c.out_shape(0), Reducer::Max, w.kernel,
                          [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                            Tap tap = pool_tap(wp, xp->shape, idx, r);
                            return guarded(tap.inside, at(xp, tap.index), reducer_identity(Reducer::Max, t));
                          });
  TensorRef y = maxv;
  if (has_empty)  // a window with nothing to compare yields 0, not the reducer's identity
    y = compute(c.name(), "injective", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
      return select(window_nonempty(w, in_spatial, idx), at(maxv, idx), const_of(t, 0));
    });
  c.set_output(0, y);
  if (c.has_output(1)) c.set_output(1, max_pool_indices(c, w, maxv));
}

// ---- AveragePool and LpPool ----------------------------------------------------------------------

// sum over the window's taps inside the input of term(x), in the compute dtype.
// (Zero padding adds nothing to a sum of |v|^p either.)
TensorRef window_sum(const LowerContext& c, const nn::Window& w, DType acc, const std::function<Expr(const Expr&)>& term) {
  const auto [x, wp] = pool_input(c, w, const_of(c.input(0)->dtype, 0));
  return reduce(c.name("sum"), "pool", acc, c.out_shape(0), Reducer::Sum, w.kernel,
                [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                  Tap tap = pool_tap(wp, x->shape, idx, r);
                  return guarded(tap.inside, term(cast(acc, at(x, tap.index))), const_of(acc, 0));
                });
}

void lower_average_pool(LowerContext& c) {
  nn::Window w = pool_window(c);
  DType acc = compute_dtype(c.out_dtype(0)), t = c.out_dtype(0);
  TensorRef sum = window_sum(c, w, acc, [](const Expr& v) { return v; });
  // The divisor: taps inside the input, or with count_include_pad also those in the explicit
  // padding (never those past it, which only ceil_mode creates). An empty window gives 0 / 0 = NaN.
  Shape in_spatial = pool_spatial(c, c.shape(0));
  bool count_pad = c.node().attr_int("count_include_pad", 0) != 0;
  std::vector<int64_t> lo(w.rank()), hi(w.rank());
  for (size_t a = 0; a < w.rank(); ++a) {
    lo[a] = count_pad ? -w.pads_begin[a] : 0;
    hi[a] = in_spatial[a] + (count_pad ? w.pads_end[a] : 0);
  }
  c.set_output(0, compute(c.name(), "pool", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    return cast(t, at(sum, idx) / cast(acc, window_count(w, idx, lo, hi)));
  }));
}

// LpPool's p: a float attribute in opset 1, an int since opset 2.
double lp_order(const Node& n) {
  auto it = n.attrs.find("p");
  if (it != n.attrs.end() && std::holds_alternative<double>(it->second)) return std::get<double>(it->second);
  return static_cast<double>(n.attr_int("p", 2));
}

// |v|^p, with the common orders written without pow.
Expr lp_term(const Expr& v, double p) {
  if (p == 2) return v * v;
  if (p == 1) return unary(ExprOp::Abs, v);
  return binary(ExprOp::Pow, unary(ExprOp::Abs, v), const_of(v->dtype, p));
}

Expr lp_root(const Expr& sum, double p) {
  if (p == 2) return unary(ExprOp::Sqrt, sum);
  return binary(ExprOp::Pow, sum, const_of(sum->dtype, 1 / p));
}

void lower_lp_pool(LowerContext& c) {
  nn::Window w = pool_window(c);
  DType acc = compute_dtype(c.out_dtype(0)), t = c.out_dtype(0);
  double p = lp_order(c.node());
  TensorRef sum = window_sum(c, w, acc, [p](const Expr& v) { return lp_term(v, p); });
  c.set_output(0, compute(c.name(), "pool", t, c.out_shape(0),
                          [&](const std::vector<Expr>& idx) { return cast(t, lp_root(at(sum, idx), p)); }));
}

// ---- Global pooling -----------------------------------------------------------------------------

enum class GlobalKind { Average, Max, Lp };

// reducer over the whole spatial plane of term(x) into an N x C x 1 x ... stage.
TensorRef plane_reduce(const LowerContext& c, const std::string& name, DType dtype, Reducer reducer,
                       const std::function<Expr(const Expr&)>& term) {
  const TensorRef& x = c.input(0);
  return reduce(name, "reduction", dtype, c.out_shape(0), reducer, spatial_of(x->shape),
                [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                  std::vector<Expr> xi{idx[0], idx[1]};
                  xi.insert(xi.end(), r.begin(), r.end());
                  return term(cast(dtype, at(c.input(0), xi)));
                });
}

OpLowering global_pool_lowering(const std::string& op_type, GlobalKind kind) {
  return {op_type, "", [kind](LowerContext& c) {
            DType t = c.out_dtype(0), acc = compute_dtype(t);
            if (kind == GlobalKind::Max) {
              c.set_output(0, plane_reduce(c, c.name(), t, Reducer::Max, [](const Expr& v) { return v; }));
              return;
            }
            double p = kind == GlobalKind::Lp ? lp_order(c.node()) : 1;
            TensorRef sum = plane_reduce(c, c.name("sum"), acc, Reducer::Sum, [&](const Expr& v) {
              return kind == GlobalKind::Lp ? lp_term(v, p) : v;
            });
            double plane = static_cast<double>(num_elements(spatial_of(c.shape(0))));
            c.set_output(0, compute(c.name(), "elementwise", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
              Expr s = at(sum, idx);
              return cast(t, kind == GlobalKind::Lp ? lp_root(s, p) : s / const_of(acc, plane));
            }));
          }};
}

// ---- MaxUnpool ----------------------------------------------------------------------------------

// The unpooled shape (what the MaxPool that produced the indices read); indices are flat positions
// in it. The output (output_shape input) may be larger: unpooled coordinates keep their place.
Shape unpooled_shape(const Node& node, const Shape& x) {
  size_t r = x.size() - 2;
  std::vector<int64_t> kernel = node.required_ints("kernel_shape");
  std::vector<int64_t> strides = nn::spatial_attr(node, "strides", r, 1, 1);
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  Shape out{x[0], x[1]};
  for (size_t a = 0; a < r; ++a) out.push_back((x[2 + a] - 1) * strides[a] + kernel[a] - pads[a] - pads[a + r]);
  return out;
}

// A scatter as a gather: each output element takes the last X element whose index targets it (the
// order the op's writes happen in), found by a max-reduction over X's flat positions, else 0.
void lower_max_unpool(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const TensorRef& indices = c.input(1);
  const Shape& out = c.out_shape(0);
  Shape unpooled = unpooled_shape(c.node(), x->shape);
  std::vector<int64_t> x_strides = strides_of(x->shape), u_strides = strides_of(unpooled);
  TensorRef source = reduce(c.name("source"), "injective", DType::Int64, out, Reducer::Max, x->shape,
                            [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                              // Output coordinates beyond the unpooled shape are never targeted.
                              Expr target = int_imm(0), in_box;
                              for (size_t a = 0; a < out.size(); ++a) {
                                target = target + idx[a] * u_strides[a];
                                if (out[a] > unpooled[a]) in_box = and_cond(in_box, idx[a] < int_imm(unpooled[a]));
                              }
                              Expr flat = int_imm(0);
                              for (size_t a = 0; a < r.size(); ++a) flat = flat + r[a] * x_strides[a];
                              Expr hit = and_cond(in_box, eq(at(indices, r), target));
                              return select(hit, flat, int_imm(-1));
                            },
                            int_imm(-1));
  int64_t last = num_elements(x->shape) - 1;
  c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), out, [&](const std::vector<Expr>& idx) {
    Expr src = at(source, idx);
    // The position is loaded from a stage: clamp it so the gather can never leave X.
    Expr clamped = min(max(src, int_imm(0)), int_imm(last));
    return select(src >= int_imm(0), at(x, unravel(clamped, x->shape)), const_of(c.out_dtype(0), 0));
  }));
}

}  // namespace

void register_pool_lowerings(LoweringRegistry& r) {
  r.add({"MaxPool", "", lower_max_pool});
  r.add({"AveragePool", "", lower_average_pool});
  r.add({"LpPool", "", lower_lp_pool});
  r.add(global_pool_lowering("GlobalAveragePool", GlobalKind::Average));
  r.add(global_pool_lowering("GlobalMaxPool", GlobalKind::Max));
  r.add(global_pool_lowering("GlobalLpPool", GlobalKind::Lp));
  r.add({"MaxUnpool", "", lower_max_unpool});
  r.add({"MaxPoolBlocked", "kiln", lower_max_pool});
  r.add({"AveragePoolBlocked", "kiln", lower_average_pool});
}

}  // namespace kiln::te::nn_lower
