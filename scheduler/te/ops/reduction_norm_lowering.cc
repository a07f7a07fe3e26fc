// Normalisations as tensor expressions: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN. Statistics
// are reductions to keep-dims tensors that the normalising stage reads back with broadcast indices.
#include "frontend/ops/axes_and_broadcast.h"
#include "scheduler/te/ops/reduction_lowering_common.h"

namespace kiln::te::reduction_lowering {
namespace {

double epsilon_of(const LowerContext& c) { return c.node().attr_float("epsilon", 1e-5); }

// Axes from `first` on (LayerNormalization, RMSNormalization, Softmax-style rows).
std::vector<bool> axes_from(int64_t first, size_t rank) {
  std::vector<bool> r(rank, false);
  for (size_t i = static_cast<size_t>(first); i < rank; ++i) r[i] = true;
  return r;
}

// ---- BatchNormalization -------------------------------------------------------------------------

// y = (x - mean[p]) / sqrt(var[p] + epsilon) * scale[p] + bias[p]. In inference mode mean/var are the
// inputs; with training_mode (opset >= 14) they are the batch statistics over every axis but the
// channel axis, and outputs 1/2 are the momentum-blended running statistics.
void lower_batch_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const Shape& shape = x->shape;
  DType t = compute_dtype(x->dtype);
  double epsilon = epsilon_of(c);
  // Opsets 7-8 with spatial=0 give every element of a sample its own parameters (shape [C, D...]).
  bool per_element = c.opset() < 9 && c.node().attr_int("spatial", 1) == 0;
  bool training = c.opset() >= 14 && c.node().attr_int("training_mode", 0) != 0;
  auto param_index = [&](const std::vector<Expr>& idx) {
    return per_element ? std::vector<Expr>(idx.begin() + 1, idx.end()) : std::vector<Expr>{idx[1]};
  };
  auto param = [&](size_t input, const std::vector<Expr>& idx) { return load_as(c.input(input), param_index(idx), t); };

  std::vector<bool> batch_axes(shape.size(), true);
  batch_axes[1] = false;
  ValueFn mean = [&](const std::vector<Expr>& idx) { return param(3, idx); };
  ValueFn var = [&](const std::vector<Expr>& idx) { return param(4, idx); };
  Moments batch;
  if (training) {
    batch = moments(c, t, shape, batch_axes, [&](const std::vector<Expr>& idx) { return load_as(x, idx, t); });
    mean = [&](const std::vector<Expr>& idx) { return at(batch.mean, kept_indices(idx, batch_axes)); };
    var = [&](const std::vector<Expr>& idx) { return at(batch.var, kept_indices(idx, batch_axes)); };
    double momentum = c.node().attr_float("momentum", 0.9);
    // running = input * momentum + batch * (1 - momentum), per channel, in the statistics' dtype.
    auto running = [&](size_t output, size_t input, const TensorRef& stat, const char* suffix) {
      DType out_t = c.out_dtype(output);
      DType st = compute_dtype(out_t);
      return compute(c.name(suffix), "elementwise", out_t, c.out_shape(output), [&](const std::vector<Expr>& idx) {
        std::vector<Expr> stat_idx(shape.size(), int_imm(0));
        stat_idx[1] = idx[0];
        Expr blended = load_as(c.input(input), idx, st) * const_of(st, momentum) +
                       cast(st, at(stat, stat_idx)) * const_of(st, 1 - momentum);
        return cast(out_t, blended);
      });
    };
    if (c.has_output(1)) c.set_output(1, running(1, 3, batch.mean, "running_mean"));
    if (c.has_output(2)) c.set_output(2, running(2, 4, batch.var, "running_var"));
  }
  c.set_output(0, compute(c.name(), "broadcast", x->dtype, shape, [&](const std::vector<Expr>& idx) {
    Expr y = (load_as(x, idx, t) - mean(idx)) / unary(ExprOp::Sqrt, var(idx) + const_of(t, epsilon)) * param(1, idx) +
             param(2, idx);
    return cast(x->dtype, y);
  }));
}

// ---- Instance, layer, group and RMS normalisation --------------------------------------------------

// (x - mean) * inv_std * scale + bias, with the statistics read through `stat_index` and the
// parameters through `scale_at` / `bias_at` (bias may be null).
TensorRef standardise(const LowerContext& c, const TensorRef& x, DType t, const Moments& m, const TensorRef& inv_std,
                      const std::function<std::vector<Expr>(const std::vector<Expr>&)>& stat_index,
                      const ValueFn& scale_at, const ValueFn& bias_at) {
  return compute(c.name(), "broadcast", x->dtype, x->shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> s = stat_index(idx);
    Expr y = (load_as(x, idx, t) - at(m.mean, s)) * at(inv_std, s) * scale_at(idx);
    if (bias_at) y = y + bias_at(idx);
    return cast(x->dtype, y);
  });
}

// Statistics per (n, c) over the spatial axes; scale/bias per channel.
void lower_instance_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  std::vector<bool> spatial = axes_from(2, x->shape.size());
  Moments m = moments(c, t, x->shape, spatial, [&](const std::vector<Expr>& idx) { return load_as(x, idx, t); });
  TensorRef inv_std = inverse_std(c, m.var, epsilon_of(c));
  auto channel_param = [&](size_t input) {
    return [&c, &t, input](const std::vector<Expr>& idx) { return load_as(c.input(input), {idx[1]}, t); };
  };
  c.set_output(0, standardise(c, x, t, m, inv_std,
                              [&](const std::vector<Expr>& idx) { return kept_indices(idx, spatial); },
                              channel_param(1), channel_param(2)));
}

// A parameter that broadcasts to X (LayerNormalization's and RMSNormalization's scale and bias).
ValueFn broadcast_param(const LowerContext& c, size_t input, DType t) {
  if (!c.has_input(input)) return nullptr;
  TensorRef p = c.input(input);
  Shape x_shape = c.shape(0);
  return [p, x_shape, t](const std::vector<Expr>& idx) { return load_as(p, broadcast_indices(idx, x_shape, p->shape), t); };
}

// Statistics over the axes from `axis` on; outputs 1/2 (optional) are the mean and 1/sqrt(var+eps).
void lower_layer_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  std::vector<bool> row = axes_from(normalize_axis(c.node(), c.node().attr_int("axis", -1), c.rank(0)), x->shape.size());
  Moments m = moments(c, t, x->shape, row, [&](const std::vector<Expr>& idx) { return load_as(x, idx, t); });
  TensorRef inv_std = inverse_std(c, m.var, epsilon_of(c));
  c.set_output(0, standardise(c, x, t, m, inv_std,
                              [&](const std::vector<Expr>& idx) { return kept_indices(idx, row); },
                              broadcast_param(c, 1, t), broadcast_param(c, 2, t)));
  if (c.has_output(1)) c.set_output(1, cast_stage(c.name("mean_out"), m.mean, c.out_dtype(1)));
  if (c.has_output(2)) c.set_output(2, cast_stage(c.name("inv_std_out"), inv_std, c.out_dtype(2)));
}

// X [N, C, D...] seen as [N, G, C/G, D...]: statistics per (n, g). Scale/bias are per group before
// opset 21 and per channel from it on.
void lower_group_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  int64_t groups = c.node().required_int("num_groups");
  int64_t per_group = x->shape[1] / groups;
  Shape grouped{x->shape[0], groups, per_group};
  grouped.insert(grouped.end(), x->shape.begin() + 2, x->shape.end());
  std::vector<bool> in_group = axes_from(2, grouped.size());
  Moments m = moments(c, t, grouped, in_group, [&](const std::vector<Expr>& g) {
    std::vector<Expr> idx{g[0], g[1] * per_group + g[2]};
    idx.insert(idx.end(), g.begin() + 3, g.end());
    return load_as(x, idx, t);
  });
  TensorRef inv_std = inverse_std(c, m.var, epsilon_of(c));
  auto group_of = [per_group](const Expr& channel) { return floordiv(channel, int_imm(per_group)); };
  auto param = [&c, &t, group_of](size_t input) -> ValueFn {
    bool per_channel = c.opset() >= 21;
    return [&c, &t, group_of, input, per_channel](const std::vector<Expr>& idx) {
      return load_as(c.input(input), {per_channel ? idx[1] : group_of(idx[1])}, t);
    };
  };
  c.set_output(0, standardise(c, x, t, m, inv_std,
                              [&](const std::vector<Expr>& idx) {
                                std::vector<Expr> s(grouped.size(), int_imm(0));
                                s[0] = idx[0];
                                s[1] = group_of(idx[1]);
                                return s;
                              },
                              param(1), param(2)));
}

// y = x / sqrt(mean(x^2) + epsilon) * scale over the axes from `axis` on.
void lower_rms_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  std::vector<bool> row = axes_from(normalize_axis(c.node(), c.node().attr_int("axis", -1), c.rank(0)), x->shape.size());
  Expr count = const_of(t, static_cast<double>(reduced_count(x->shape, row)));
  Expr epsilon = const_of(t, epsilon_of(c));
  TensorRef square_sum = reduce_over(c.name("square_sum"), t, x->shape, row, true, Reducer::Sum,
                                     [&](const std::vector<Expr>& idx) {
                                       Expr v = load_as(x, idx, t);
                                       return v * v;
                                     });
  TensorRef inv_rms = compute(c.name("inv_rms"), "elementwise", t, square_sum->shape, [&](const std::vector<Expr>& idx) {
    return const_of(t, 1) / unary(ExprOp::Sqrt, at(square_sum, idx) / count + epsilon);
  });
  ValueFn scale = broadcast_param(c, 1, t);
  c.set_output(0, compute(c.name(), "broadcast", x->dtype, x->shape, [&](const std::vector<Expr>& idx) {
    return cast(x->dtype, load_as(x, idx, t) * at(inv_rms, kept_indices(idx, row)) * scale(idx));
  }));
}

// ---- Lp, mean-variance and local response normalisation -------------------------------------------

// x / ||x||_p along one axis (p = 1 or 2); a zero vector stays zero rather than becoming 0/0.
void lower_lp_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", -1), c.rank(0));
  bool l1 = c.node().attr_int("p", 2) == 1;
  std::vector<bool> along(x->shape.size(), false);
  along[static_cast<size_t>(axis)] = true;
  TensorRef norm = reduce_over(c.name("norm"), t, x->shape, along, true, Reducer::Sum, [&](const std::vector<Expr>& idx) {
    Expr v = load_as(x, idx, t);
    return l1 ? unary(ExprOp::Abs, v) : v * v;
  });
  if (!l1)
    norm = compute(c.name("l2_norm"), "elementwise", t, norm->shape,
                   [&](const std::vector<Expr>& idx) { return unary(ExprOp::Sqrt, at(norm, idx)); });
  c.set_output(0, compute(c.name(), "broadcast", x->dtype, x->shape, [&](const std::vector<Expr>& idx) {
    Expr n = at(norm, kept_indices(idx, along));
    return cast(x->dtype, select(eq(n, const_of(t, 0)), const_of(t, 0), load_as(x, idx, t) / n));
  }));
}

// (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]): ONNX adds the epsilon to the
// deviation, not the variance.
void lower_mean_variance_normalization(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  std::vector<bool> reduced(x->shape.size(), false);
  for (int64_t a : normalize_axes(c.node(), c.node().attr_ints("axes", {0, 2, 3}), c.rank(0)))
    if (!x->shape.empty()) reduced[static_cast<size_t>(a)] = true;
  Moments m = moments(c, t, x->shape, reduced, [&](const std::vector<Expr>& idx) { return load_as(x, idx, t); });
  c.set_output(0, compute(c.name(), "broadcast", x->dtype, x->shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> s = kept_indices(idx, reduced);
    Expr y = (load_as(x, idx, t) - at(m.mean, s)) / (unary(ExprOp::Sqrt, at(m.var, s)) + const_of(t, 1e-9));
    return cast(x->dtype, y);
  }));
}

// y = x / (bias + alpha / size * sum of squares over a channel window) ^ beta. The window around
// channel c is [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped to the tensor: a reduction over
// the `size` window offsets whose out-of-range taps contribute 0.
void lower_lrn(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  const Node& node = c.node();
  int64_t size = node.required_int("size");
  double alpha = node.attr_float("alpha", 1e-4), beta = node.attr_float("beta", 0.75);
  double bias = node.attr_float("bias", 1.0);
  int64_t channels = x->shape[1];
  int64_t before = (size - 1) / 2;
  TensorRef square_sum = reduce(c.name("square_sum"), "reduction", t, x->shape, Reducer::Sum, {size},
                                [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                                  Expr ch = idx[1] + r[0] - before;
                                  std::vector<Expr> tap = idx;
                                  tap[1] = ch;
                                  Expr v = load_as(x, tap, t);
                                  Expr inside = ch >= int_imm(0) && ch < int_imm(channels);
                                  return select(inside, v * v, const_of(t, 0));
                                });
  c.set_output(0, compute(c.name(), "broadcast", x->dtype, x->shape, [&](const std::vector<Expr>& idx) {
    Expr denom = binary(ExprOp::Pow, const_of(t, bias) + const_of(t, alpha / static_cast<double>(size)) * at(square_sum, idx),
                        const_of(t, beta));
    return cast(x->dtype, load_as(x, idx, t) / denom);
  }));
}

}  // namespace

void register_normalization_lowerings(LoweringRegistry& r) {
  r.add({"BatchNormalization", "", lower_batch_normalization});
  r.add({"InstanceNormalization", "", lower_instance_normalization});
  r.add({"LayerNormalization", "", lower_layer_normalization});
  r.add({"GroupNormalization", "", lower_group_normalization});
  r.add({"RMSNormalization", "", lower_rms_normalization});
  r.add({"LpNormalization", "", lower_lp_normalization});
  r.add({"MeanVarianceNormalization", "", lower_mean_variance_normalization});
  r.add({"LRN", "", lower_lrn});
}

}  // namespace kiln::te::reduction_lowering
