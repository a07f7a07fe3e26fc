// Normalisations: BatchNormalization, InstanceNormalization, LayerNormalization, GroupNormalization,
// RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN.
#include <cmath>

#include "frontend/ops/reduction_internal.h"

namespace kiln::reduction_family {
namespace {

// Mean and population variance of the elements of x that share a group; `group_of(i)` names the
// group of flat element i. Two passes (mean first) so that the variance does not cancel badly.
struct GroupStats {
  std::vector<double> mean, var;
};

template <typename GroupOf>
GroupStats group_stats(const Tensor& x, int64_t groups, GroupOf group_of) {
  GroupStats s;
  s.mean.assign(static_cast<size_t>(groups), 0.0);
  s.var.assign(static_cast<size_t>(groups), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t g = group_of(i);
    s.mean[g] += x.get_double(i);
    ++count[g];
  }
  for (int64_t g = 0; g < groups; ++g) s.mean[g] /= static_cast<double>(count[g]);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t g = group_of(i);
    double d = x.get_double(i) - s.mean[g];
    s.var[g] += d * d;
  }
  for (int64_t g = 0; g < groups; ++g) s.var[g] /= static_cast<double>(count[g]);
  return s;
}

// Fails unless input i is a float tensor of exactly `want` shape.
void require_param(const InferContext& c, size_t i, const char* what, const Shape& want) {
  require_float_input(c, i, what);
  if (c.shape(i) != want)
    c.fail(std::string("input '") + what + "' must have shape " + shape_str(want) + ", got " + shape_str(c.shape(i)));
}

// Fails unless input i (when present) broadcasts to `target` without growing it.
void require_broadcastable(const InferContext& c, size_t i, const char* what, const Shape& target) {
  if (!c.has_input(i)) return;
  require_float_input(c, i, what);
  auto b = broadcast(target, c.shape(i));
  if (!b || *b != target)
    c.fail(std::string("input '") + what + "' of shape " + shape_str(c.shape(i)) + " does not broadcast to " +
           shape_str(target));
}

void require_channels(const InferContext& c) {
  require_float_input(c, 0, "X");
  if (c.rank(0) < 2) c.fail("X must have shape [N, C, ...], got " + shape_str(c.shape(0)));
}

DType stash_dtype(const InferContext& c) {
  DType t = dtype_from_int(static_cast<int32_t>(c.node().attr_int("stash_type", 1)));
  if (!is_float(t)) c.fail("stash_type " + dtype_name(t) + " is not a float dtype");
  return t;
}

// ---- BatchNormalization -------------------------------------------------------------------------

// Opset 14 added training_mode (outputs: Y, running_mean, running_var). Before it, extra outputs meant
// training with a different output set, which kiln does not implement.
bool batchnorm_training(const Node& node) { return node.opset >= 14 && node.attr_int("training_mode", 0) != 0; }

// Opsets 7-8 had `spatial`: 0 gives every element of a sample its own statistics (shape [C, D...]).
bool batchnorm_per_element(const Node& node) { return node.opset < 9 && node.attr_int("spatial", 1) == 0; }

OpDef batch_normalization_op() {
  OpDef d;
  d.op_type = "BatchNormalization";
  d.infer = [](InferContext& c) {
    require_channels(c);
    const Shape& x = c.shape(0);
    Shape param = batchnorm_per_element(c.node()) ? Shape(x.begin() + 1, x.end()) : Shape{x[1]};
    const char* names[] = {"scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i <= 4; ++i) require_param(c, i, names[i - 1], param);
    // Opset 15 lets scale/B and mean/var have their own float dtypes; before that all match X.
    if (c.opset() < 15) same_dtype_inputs(c);
    require_dtype(c, 2, c.dtype(1), "B");
    require_dtype(c, 4, c.dtype(3), "input_var");
    bool training = batchnorm_training(c.node());
    if (c.opset() < 14 && (c.has_output(1) || c.has_output(2) || c.has_output(3) || c.has_output(4)))
      c.unsupported("training outputs of BatchNormalization before opset 14 are not supported");
    if (!training && (c.has_output(1) || c.has_output(2)))
      c.fail("outputs running_mean/running_var exist only with training_mode=1");
    c.set_output(0, c.dtype(0), x);
    c.set_output(1, c.dtype(3), param);
    c.set_output(2, c.dtype(3), param);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor &scale = c.input(1), &bias = c.input(2), &mean_in = c.input(3), &var_in = c.input(4);
    int64_t channels = x.shape()[1];
    int64_t spatial = extent_product(x.shape(), 2, x.shape().size());
    bool per_element = batchnorm_per_element(c.node());
    auto param_of = [&](int64_t i) { return per_element ? i % (channels * spatial) : (i / spatial) % channels; };
    double epsilon = c.node().attr_float("epsilon", 1e-5);
    std::vector<double> mean = mean_in.to_doubles(), var = var_in.to_doubles();
    bool training = batchnorm_training(c.node());
    if (training) {
      GroupStats batch = group_stats(x, channels, param_of);
      double momentum = c.node().attr_float("momentum", 0.9);
      Tensor running_mean(mean_in.dtype(), mean_in.shape()), running_var(var_in.dtype(), var_in.shape());
      for (int64_t ch = 0; ch < channels; ++ch) {
        running_mean.set_double(ch, mean[ch] * momentum + batch.mean[ch] * (1 - momentum));
        running_var.set_double(ch, var[ch] * momentum + batch.var[ch] * (1 - momentum));
      }
      mean = batch.mean;
      var = batch.var;
      c.set_output(1, std::move(running_mean));
      c.set_output(2, std::move(running_var));
    }
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t p = param_of(i);
      y.set_double(i, (x.get_double(i) - mean[p]) / std::sqrt(var[p] + epsilon) * scale.get_double(p) +
                          bias.get_double(p));
    }
    c.set_output(0, std::move(y));
  };
  // Inference: subtract, multiply by the folded scale, add (4 per element counting the divide).
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 4); };
  return d;
}

// ---- Instance, layer, group and RMS normalisation ----------------------------------------------------

// y = (x - mean) / sqrt(var + epsilon) * scale + bias, where mean/var are per group of elements and
// scale/bias are looked up per element.
template <typename GroupOf, typename ParamOf>
Tensor standardise(const Tensor& x, const GroupStats& stats, double epsilon, GroupOf group_of, const Tensor& scale,
                   const Tensor* bias, ParamOf param_of) {
  std::vector<double> inv_std(stats.var.size());
  for (size_t g = 0; g < inv_std.size(); ++g) inv_std[g] = 1.0 / std::sqrt(stats.var[g] + epsilon);
  Tensor y(x.dtype(), x.shape());
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t g = group_of(i);
    int64_t p = param_of(i);
    double v = (x.get_double(i) - stats.mean[g]) * inv_std[g] * scale.get_double(p);
    if (bias) v += bias->get_double(p);
    y.set_double(i, v);
  }
  return y;
}

OpDef instance_normalization_op() {
  OpDef d;
  d.op_type = "InstanceNormalization";
  d.infer = [](InferContext& c) {
    require_channels(c);
    require_param(c, 1, "scale", {c.shape(0)[1]});
    require_param(c, 2, "B", {c.shape(0)[1]});
    same_dtype_inputs(c);
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t channels = x.shape()[1];
    int64_t spatial = extent_product(x.shape(), 2, x.shape().size());
    auto group_of = [spatial](int64_t i) { return i / spatial; };  // one group per (n, c)
    auto channel_of = [spatial, channels](int64_t i) { return (i / spatial) % channels; };
    GroupStats stats = group_stats(x, x.shape()[0] * channels, group_of);
    c.set_output(0, standardise(x, stats, c.node().attr_float("epsilon", 1e-5), group_of, c.input(1), &c.input(2),
                                channel_of));
  };
  // Statistics (3 per element: add, subtract, square-add) plus the affine normalisation (4 per element).
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 7); };
  return d;
}

// LayerNormalization and RMSNormalization normalise over the trailing axes from `axis` on.
int64_t trailing_axis(const Node& node, int64_t rank) { return normalize_axis(node, node.attr_int("axis", -1), rank); }

OpDef layer_normalization_op() {
  OpDef d;
  d.op_type = "LayerNormalization";
  d.infer = [](InferContext& c) {
    require_float_input(c, 0, "X");
    if (c.rank(0) == 0) c.fail("X must have rank >= 1");
    c.require_input(1, "Scale");
    require_broadcastable(c, 1, "Scale", c.shape(0));
    require_broadcastable(c, 2, "B", c.shape(0));
    int64_t axis = trailing_axis(c.node(), c.rank(0));
    DType stash = stash_dtype(c);
    Shape stat_shape = c.shape(0);
    for (size_t i = static_cast<size_t>(axis); i < stat_shape.size(); ++i) stat_shape[i] = 1;
    c.set_output(0, c.dtype(0), c.shape(0));
    c.set_output(1, stash, stat_shape);
    c.set_output(2, stash, stat_shape);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t axis = trailing_axis(c.node(), x.rank());
    int64_t row = extent_product(x.shape(), axis, x.shape().size());
    int64_t rows = extent_product(x.shape(), 0, axis);
    auto group_of = [row](int64_t i) { return i / row; };
    GroupStats stats = group_stats(x, rows, group_of);
    double epsilon = c.node().attr_float("epsilon", 1e-5);
    const Tensor& scale = c.input(1);
    const Tensor* bias = c.has_input(2) ? &c.input(2) : nullptr;
    std::vector<int64_t> scale_of = broadcast_index_map(x.shape(), scale.shape());
    std::vector<int64_t> bias_of = bias ? broadcast_index_map(x.shape(), bias->shape()) : std::vector<int64_t>{};
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t g = group_of(i);
      double v = (x.get_double(i) - stats.mean[g]) / std::sqrt(stats.var[g] + epsilon) * scale.get_double(scale_of[i]);
      if (bias) v += bias->get_double(bias_of[i]);
      y.set_double(i, v);
    }
    Shape stat_shape = x.shape();
    for (size_t i = static_cast<size_t>(axis); i < stat_shape.size(); ++i) stat_shape[i] = 1;
    DType stash = dtype_from_int(static_cast<int32_t>(c.node().attr_int("stash_type", 1)));
    Tensor mean(stash, stat_shape), inv_std_dev(stash, stat_shape);
    for (int64_t g = 0; g < rows; ++g) {
      mean.set_double(g, stats.mean[g]);
      inv_std_dev.set_double(g, 1.0 / std::sqrt(stats.var[g] + epsilon));
    }
    c.set_output(0, std::move(y));
    c.set_output(1, std::move(mean));
    c.set_output(2, std::move(inv_std_dev));
  };
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 7); };
  return d;
}

OpDef rms_normalization_op() {
  OpDef d;
  d.op_type = "RMSNormalization";
  d.infer = [](InferContext& c) {
    require_float_input(c, 0, "X");
    if (c.rank(0) == 0) c.fail("X must have rank >= 1");
    c.require_input(1, "scale");
    require_broadcastable(c, 1, "scale", c.shape(0));
    trailing_axis(c.node(), c.rank(0));
    stash_dtype(c);
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t axis = trailing_axis(c.node(), x.rank());
    int64_t row = extent_product(x.shape(), axis, x.shape().size());
    int64_t rows = extent_product(x.shape(), 0, axis);
    std::vector<double> mean_square(static_cast<size_t>(rows), 0.0);
    for (int64_t i = 0; i < x.size(); ++i) mean_square[i / row] += x.get_double(i) * x.get_double(i);
    double epsilon = c.node().attr_float("epsilon", 1e-5);
    std::vector<double> inv_rms(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) inv_rms[r] = 1.0 / std::sqrt(mean_square[r] / static_cast<double>(row) + epsilon);
    const Tensor& scale = c.input(1);
    std::vector<int64_t> scale_of = broadcast_index_map(x.shape(), scale.shape());
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) y.set_double(i, x.get_double(i) * inv_rms[i / row] * scale.get_double(scale_of[i]));
    c.set_output(0, std::move(y));
  };
  // Square-add per element, then multiply by the inverse RMS and the scale.
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 4); };
  return d;
}

OpDef group_normalization_op() {
  OpDef d;
  d.op_type = "GroupNormalization";
  d.infer = [](InferContext& c) {
    require_channels(c);
    int64_t groups = c.node().required_int("num_groups");
    int64_t channels = c.shape(0)[1];
    if (groups <= 0 || channels % groups != 0)
      c.fail("num_groups " + std::to_string(groups) + " must be positive and divide the " + std::to_string(channels) +
             " channels");
    // Opset 18 took one scale/bias per group; opset 21 changed them to one per channel.
    Shape param{c.opset() < 21 ? groups : channels};
    require_param(c, 1, "scale", param);
    require_param(c, 2, "bias", param);
    same_dtype_inputs(c);
    if (c.opset() >= 21) stash_dtype(c);
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t groups = c.node().required_int("num_groups");
    int64_t channels = x.shape()[1];
    int64_t spatial = extent_product(x.shape(), 2, x.shape().size());
    int64_t group_block = channels / groups * spatial;  // elements of one (n, group), contiguous
    auto group_of = [group_block](int64_t i) { return i / group_block; };
    GroupStats stats = group_stats(x, x.shape()[0] * groups, group_of);
    double epsilon = c.node().attr_float("epsilon", 1e-5);
    if (c.opset() < 21) {
      auto param_of = [group_block, groups](int64_t i) { return (i / group_block) % groups; };
      c.set_output(0, standardise(x, stats, epsilon, group_of, c.input(1), &c.input(2), param_of));
    } else {
      auto param_of = [spatial, channels](int64_t i) { return (i / spatial) % channels; };
      c.set_output(0, standardise(x, stats, epsilon, group_of, c.input(1), &c.input(2), param_of));
    }
  };
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 7); };
  return d;
}

// ---- Lp, mean-variance and local response normalisation -------------------------------------------

OpDef lp_normalization_op() {
  OpDef d;
  d.op_type = "LpNormalization";
  auto check = [](const Node& node, int64_t rank) {
    int64_t p = node.attr_int("p", 2);
    if (p != 1 && p != 2) throw Error(node.label() + ": p must be 1 or 2, got " + std::to_string(p));
    if (rank == 0) throw Error(node.label() + ": input must have rank >= 1");
    return normalize_axis(node, node.attr_int("axis", -1), rank);
  };
  d.infer = [check](InferContext& c) {
    require_float_input(c, 0, "input");
    check(c.node(), c.rank(0));
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [check](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t axis = check(c.node(), x.rank());
    bool l1 = c.node().attr_int("p", 2) == 1;
    Shape kept = x.shape();
    kept[axis] = 1;
    std::vector<int64_t> norm_of = broadcast_index_map(x.shape(), kept);
    std::vector<double> norm(static_cast<size_t>(num_elements(kept)), 0.0);
    for (int64_t i = 0; i < x.size(); ++i) {
      double v = x.get_double(i);
      norm[norm_of[i]] += l1 ? std::fabs(v) : v * v;
    }
    if (!l1)
      for (double& n : norm) n = std::sqrt(n);
    Tensor y(x.dtype(), x.shape());
    // A zero vector stays zero rather than becoming 0/0.
    for (int64_t i = 0; i < x.size(); ++i) {
      double n = norm[norm_of[i]];
      y.set_double(i, n == 0 ? 0.0 : x.get_double(i) / n);
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 3); };
  return d;
}

OpDef mean_variance_normalization_op() {
  OpDef d;
  d.op_type = "MeanVarianceNormalization";
  auto kept_shape = [](const Node& node, const Shape& in) {
    std::vector<int64_t> axes = node.attr_ints("axes", {0, 2, 3});
    Shape kept = in;
    for (int64_t a : normalize_axes(node, axes, static_cast<int64_t>(in.size())))
      if (!in.empty()) kept[a] = 1;
    return kept;
  };
  d.infer = [kept_shape](InferContext& c) {
    require_float_input(c, 0, "X");
    kept_shape(c.node(), c.shape(0));
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [kept_shape](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape kept = kept_shape(c.node(), x.shape());
    std::vector<int64_t> group_of = broadcast_index_map(x.shape(), kept);
    GroupStats stats = group_stats(x, num_elements(kept), [&group_of](int64_t i) { return group_of[i]; });
    // ONNX defines Y = (X - mean) / (sqrt(var) + 1e-9): the epsilon is added to the deviation.
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t g = group_of[i];
      y.set_double(i, (x.get_double(i) - stats.mean[g]) / (std::sqrt(stats.var[g]) + 1e-9));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 5); };
  return d;
}

OpDef lrn_op() {
  OpDef d;
  d.op_type = "LRN";
  d.infer = [](InferContext& c) {
    require_channels(c);
    if (c.node().required_int("size") <= 0) c.fail("size must be positive");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Node& node = c.node();
    int64_t size = node.required_int("size");
    double alpha = node.attr_float("alpha", 1e-4), beta = node.attr_float("beta", 0.75);
    double bias = node.attr_float("bias", 1.0);
    int64_t channels = x.shape()[1];
    int64_t spatial = extent_product(x.shape(), 2, x.shape().size());
    // The window over channels is [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped to the tensor.
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t ch = (i / spatial) % channels;
      int64_t channel0 = i - ch * spatial;  // the same sample and position in channel 0
      double square_sum = 0;
      for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(channels - 1, ch + after); ++k) {
        double v = x.get_double(channel0 + k * spatial);
        square_sum += v * v;
      }
      y.set_double(i, x.get_double(i) / std::pow(bias + alpha / static_cast<double>(size) * square_sum, beta));
    }
    c.set_output(0, std::move(y));
  };
  // Per element: `size` square-adds, then scale, add bias, pow and divide.
  d.flops = [](const NodeShapes& s) {
    return input_elements_times(s, 2.0 * static_cast<double>(s.node.attr_int("size", 1)) + 4);
  };
  return d;
}

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  r.add(batch_normalization_op());
  r.add(instance_normalization_op());
  r.add(layer_normalization_op());
  r.add(group_normalization_op());
  r.add(rms_normalization_op());
  r.add(lp_normalization_op());
  r.add(mean_variance_normalization_op());
  r.add(lrn_op());
}

}  // namespace kiln::reduction_family
