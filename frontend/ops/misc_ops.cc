// The misc family's entry point and its small ops: Det, BitCast, SwiGLU, TensorScatter, the ai.onnx.ml
// ops Binarizer and ArrayFeatureExtractor, and the ai.onnx.preview.training optimizers Adagrad, Momentum
// and Adam. Sampling ops live in misc_sampling.cc, data-dependent shapes in misc_dynamic.cc.
#include <cmath>
#include <cstring>
#include <functional>

#include "frontend/ops/misc_common.h"

namespace kiln {
namespace misc {
namespace {

// ---- Det --------------------------------------------------------------------------------------------

// Determinant by Gaussian elimination with partial pivoting, in double.
double determinant(std::vector<double> a, int64_t n) {
  double det = 1.0;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    if (a[pivot * n + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
      det = -det;
    }
    double p = a[col * n + col];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      double f = a[r * n + col] / p;
      if (f == 0.0) continue;
      for (int64_t k = col + 1; k < n; ++k) a[r * n + k] -= f * a[col * n + k];
    }
  }
  return det;
}

OpDef det_op() {
  OpDef d;
  d.op_type = "Det";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    require_float_input(c, 0, "X");
    const Shape& s = c.shape(0);
    if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
      c.fail("X must be [*, M, M] (square matrices), got " + shape_str(s));
    c.set_output(0, c.dtype(0), Shape(s.begin(), s.end() - 2));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t n = x.shape().back();
    Tensor y(x.dtype(), Shape(x.shape().begin(), x.shape().end() - 2));
    std::vector<double> m(static_cast<size_t>(n * n));
    for (int64_t b = 0; b < y.size(); ++b) {
      for (int64_t i = 0; i < n * n; ++i) m[i] = x.get_double(b * n * n + i);
      y.set_double(b, determinant(m, n));
    }
    c.set_output(0, std::move(y));
  };
  // Elimination: about 2 M^3 / 3 FLOPs per matrix.
  d.flops = [](const NodeShapes& s) {
    double m = static_cast<double>(s.in[0].back());
    return static_cast<double>(num_elements(s.out[0])) * 2.0 * m * m * m / 3.0;
  };
  return d;
}

// ---- BitCast ----------------------------------------------------------------------------------------

// ONNX BitCast requires equal element widths (same shape). kiln also accepts different widths with the
// usual convention: a wider source gains a trailing axis of width ratio, a narrower source loses a
// trailing axis that must equal the ratio. Bytes are little endian, as kiln stores them.
Shape bitcast_shape(const Node& node, DType from, DType to, const Shape& in) {
  size_t from_size = dtype_size(from), to_size = dtype_size(to);
  Shape out = in;
  if (from_size > to_size) {
    out.push_back(static_cast<int64_t>(from_size / to_size));
  } else if (from_size < to_size) {
    int64_t ratio = static_cast<int64_t>(to_size / from_size);
    if (in.empty() || in.back() != ratio)
      fail(node, "casting " + dtype_name(from) + " to " + dtype_name(to) + " needs a last axis of " +
                     std::to_string(ratio) + ", got shape " + shape_str(in));
    out.pop_back();
  }
  return out;
}

DType bitcast_target(const Node& node) {
  DType to = dtype_from_int(static_cast<int32_t>(node.required_int("to")));
  if (!is_supported(to)) throw Unsupported(node.label() + ": target dtype " + dtype_name(to) + " is not supported");
  return to;
}

OpDef bitcast_op() {
  OpDef d;
  d.op_type = "BitCast";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    DType to = bitcast_target(c.node());
    c.set_output(0, to, bitcast_shape(c.node(), c.dtype(0), to, c.shape(0)));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    DType to = bitcast_target(c.node());
    Tensor y(to, bitcast_shape(c.node(), x.dtype(), to, x.shape()));
    std::memcpy(y.data(), x.data(), x.byte_size());
    c.set_output(0, std::move(y));
  };
  return d;
}

// ---- SwiGLU -----------------------------------------------------------------------------------------

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

// Y = A * sigmoid(alpha * A) * B, with A and B of one shape (no broadcasting, per the spec).
OpDef swiglu_op() {
  OpDef d;
  d.op_type = "SwiGLU";
  d.infer = [](InferContext& c) {
    c.require_input(0, "A");
    c.require_input(1, "B");
    require_float_input(c, 0, "A");
    DType t = same_dtype_inputs(c);
    if (c.shape(0) != c.shape(1))
      c.fail("A and B must have the same shape, got " + shape_str(c.shape(0)) + " and " + shape_str(c.shape(1)));
    c.set_output(0, t, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& a = c.input(0);
    const Tensor& b = c.input(1);
    double alpha = c.node().attr_float("alpha", 1.0);
    Tensor y(a.dtype(), a.shape());
    for (int64_t i = 0; i < a.size(); ++i) {
      double g = a.get_double(i);
      y.set_double(i, g * sigmoid(alpha * g) * b.get_double(i));
    }
    c.set_output(0, std::move(y));
  };
  // alpha * a, the sigmoid (exp, add, divide) and two products.
  d.flops = [](const NodeShapes& s) { return 6.0 * static_cast<double>(num_elements(s.out[0])); };
  return d;
}

// ---- TensorScatter ----------------------------------------------------------------------------------

// Writes `update` into a copy of `past_cache` along the sequence axis, at write_indices[batch] (0 when
// absent) for each batch entry; mode "circular" wraps positions modulo the cache length.
struct ScatterGeometry {
  int64_t axis, batch, prefix, cache_len, update_len, inner;
  bool circular;
};

ScatterGeometry tensor_scatter_geometry(const Node& node, const Shape& cache, const Shape& update) {
  int64_t r = static_cast<int64_t>(cache.size());
  if (r < 2) fail(node, "past_cache must have rank >= 2, got " + shape_str(cache));
  if (update.size() != cache.size())
    fail(node, "update " + shape_str(update) + " must have the rank of past_cache " + shape_str(cache));
  int64_t axis = normalize_axis(node, node.attr_int("axis", -2), r);
  if (axis == 0) fail(node, "axis must not be the batch axis 0");
  for (int64_t a = 0; a < r; ++a)
    if (a != axis && update[a] != cache[a])
      fail(node, "update " + shape_str(update) + " and past_cache " + shape_str(cache) +
                     " may differ only along axis " + std::to_string(axis));
  if (update[axis] > cache[axis])
    fail(node, "update is longer than the cache along axis " + std::to_string(axis));
  std::string mode = node.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") fail(node, "mode must be 'linear' or 'circular', got '" + mode + "'");
  ScatterGeometry g{axis, cache[0], 1, cache[axis], update[axis], 1, mode == "circular"};
  for (int64_t a = 0; a < axis; ++a) g.prefix *= cache[a];
  for (int64_t a = axis + 1; a < r; ++a) g.inner *= cache[a];
  return g;
}

OpDef tensor_scatter_op() {
  OpDef d;
  d.op_type = "TensorScatter";
  d.infer = [](InferContext& c) {
    c.require_input(0, "past_cache");
    c.require_input(1, "update");
    if (c.dtype(1) != c.dtype(0)) c.fail("update must have past_cache's dtype " + dtype_name(c.dtype(0)));
    ScatterGeometry g = tensor_scatter_geometry(c.node(), c.shape(0), c.shape(1));
    if (c.has_input(2)) {
      require_integer_input(c, 2, "write_indices");
      if (c.shape(2) != Shape{g.batch}) c.fail("write_indices must be [batch], got " + shape_str(c.shape(2)));
    }
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& cache = c.input(0);
    const Tensor& update = c.input(1);
    ScatterGeometry g = tensor_scatter_geometry(c.node(), cache.shape(), update.shape());
    Tensor out = cache;
    size_t row_bytes = static_cast<size_t>(g.inner) * dtype_size(cache.dtype());
    int64_t per_batch = g.prefix / std::max<int64_t>(g.batch, 1);
    for (int64_t p = 0; p < g.prefix; ++p) {
      int64_t batch = p / per_batch;
      int64_t start = c.has_input(2) ? c.input(2).get_int(batch) : 0;
      if (start < 0 || (!g.circular && start + g.update_len > g.cache_len))
        c.fail("write index " + std::to_string(start) + " with " + std::to_string(g.update_len) +
               " updates does not fit a cache of length " + std::to_string(g.cache_len));
      for (int64_t s = 0; s < g.update_len; ++s) {
        int64_t pos = (start + s) % g.cache_len;
        std::memcpy(out.data() + (p * g.cache_len + pos) * row_bytes, update.data() + (p * g.update_len + s) * row_bytes,
                    row_bytes);
      }
    }
    c.set_output(0, std::move(out));
  };
  return d;
}

// ---- ai.onnx.ml: Binarizer, ArrayFeatureExtractor ---------------------------------------------------

OpDef binarizer_op() {
  OpDef d;
  d.op_type = "Binarizer";
  d.domain = "ai.onnx.ml";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_float(c.dtype(0)) && !is_integer(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    double threshold = c.node().attr_float("threshold", 0.0);
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) y.set_double(i, x.get_double(i) > threshold ? 1.0 : 0.0);
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;
  return d;
}

// Selects entries of the last axis: X [..., N], indices (any shape, flattened) -> [..., K]; a 1-D X
// gives [1, K] (as onnxruntime and the ONNX reference do).
Shape feature_extractor_shape(const Shape& x, int64_t count) {
  if (x.size() <= 1) return {1, count};
  Shape out(x.begin(), x.end() - 1);
  out.push_back(count);
  return out;
}

OpDef array_feature_extractor_op() {
  OpDef d;
  d.op_type = "ArrayFeatureExtractor";
  d.domain = "ai.onnx.ml";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "Y");
    require_integer_input(c, 1, "Y");
    if (c.rank(0) == 0) c.fail("X must have rank >= 1");
    c.set_output(0, c.dtype(0), feature_extractor_shape(c.shape(0), num_elements(c.shape(1))));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    std::vector<int64_t> indices = tensor_ints(c.input(1));
    int64_t n = x.shape().back(), k = static_cast<int64_t>(indices.size());
    for (int64_t i : indices)
      if (i < 0 || i >= n) c.fail("index " + std::to_string(i) + " is out of range [0, " + std::to_string(n) + ")");
    Tensor y(x.dtype(), feature_extractor_shape(x.shape(), k));
    size_t esize = dtype_size(x.dtype());
    for (int64_t row = 0; row < x.size() / std::max<int64_t>(n, 1); ++row)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(y.data() + (row * k + j) * esize, x.data() + (row * n + indices[j]) * esize, esize);
    c.set_output(0, std::move(y));
  };
  return d;
}

// ---- ai.onnx.preview.training: Adagrad, Momentum, Adam ----------------------------------------------

// The optimizers update n tensors at once. Inputs: R (learning rate), T (update count), then n tensors
// per group X, G, then the state groups; outputs: n new X, then n per state group. The per-element rule
// gets r, t, x, g and the state values (updated in place) and returns the new x.
using OptimizerRule = std::function<double(double r, int64_t t, double x, double g, double* state)>;

struct OptimizerSpec {
  std::string name;
  int state_groups;
  std::function<OptimizerRule(const Node&)> make_rule;  // reads (and checks) the attributes
  double flops_per_element;
};

int64_t optimized_tensor_count(const Node& node, int state_groups) {
  int64_t groups = 2 + state_groups;
  int64_t tensors = static_cast<int64_t>(node.inputs.size()) - 2;
  if (tensors <= 0 || tensors % groups != 0)
    fail(node, "expected R, T and " + std::to_string(groups) + " groups of n tensors, got " +
                   std::to_string(node.inputs.size()) + " inputs");
  if (static_cast<int64_t>(node.outputs.size()) > tensors / groups * (1 + state_groups))
    fail(node, "too many outputs");
  return tensors / groups;
}

OpDef optimizer_op(OptimizerSpec spec) {
  OpDef d;
  d.op_type = spec.name;
  d.domain = "ai.onnx.preview.training";
  d.infer = [spec](InferContext& c) {
    int64_t n = optimized_tensor_count(c.node(), spec.state_groups);
    spec.make_rule(c.node());
    for (size_t i = 0; i < c.num_inputs(); ++i) c.require_input(i, i == 0 ? "R" : i == 1 ? "T" : "tensor");
    require_float_input(c, 0, "R");
    require_integer_input(c, 1, "T");
    if (num_elements(c.shape(0)) != 1 || num_elements(c.shape(1)) != 1) c.fail("R and T must be scalars");
    for (int64_t i = 0; i < n; ++i) {
      size_t x = static_cast<size_t>(2 + i);
      require_float_input(c, x, "X");
      for (int group = 1; group < 2 + spec.state_groups; ++group) {
        size_t other = static_cast<size_t>(2 + group * n + i);
        if (c.dtype(other) != c.dtype(x) || c.shape(other) != c.shape(x))
          c.fail("input " + std::to_string(other) + " must match X " + std::to_string(i) + " (" +
                 dtype_name(c.dtype(x)) + " " + shape_str(c.shape(x)) + ")");
      }
      for (int group = 0; group < 1 + spec.state_groups; ++group)
        c.set_output(static_cast<size_t>(group * n + i), c.dtype(x), c.shape(x));
    }
  };
  d.eval = [spec](EvalContext& c) {
    int64_t n = optimized_tensor_count(c.node(), spec.state_groups);
    OptimizerRule rule = spec.make_rule(c.node());
    double r = c.input(0).get_double(0);
    int64_t t = c.input(1).get_int(0);
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& x = c.input(static_cast<size_t>(2 + i));
      const Tensor& g = c.input(static_cast<size_t>(2 + n + i));
      std::vector<Tensor> outs(static_cast<size_t>(1 + spec.state_groups), Tensor(x.dtype(), x.shape()));
      std::vector<double> state(static_cast<size_t>(spec.state_groups));
      for (int64_t e = 0; e < x.size(); ++e) {
        for (int s = 0; s < spec.state_groups; ++s) state[s] = c.input(static_cast<size_t>(2 + (2 + s) * n + i)).get_double(e);
        outs[0].set_double(e, rule(r, t, x.get_double(e), g.get_double(e), state.data()));
        for (int s = 0; s < spec.state_groups; ++s) outs[1 + s].set_double(e, state[s]);
      }
      for (int group = 0; group < 1 + spec.state_groups; ++group)
        c.set_output(static_cast<size_t>(group * n + i), std::move(outs[group]));
    }
  };
  double per_element = spec.flops_per_element;
  int groups = 2 + spec.state_groups;
  d.flops = [per_element, groups](const NodeShapes& s) {
    double all_tensors = 0;  // every group has the elements of the X group
    for (size_t i = 2; i < s.in.size(); ++i) all_tensors += static_cast<double>(num_elements(s.in[i]));
    return per_element * all_tensors / groups;
  };
  return d;
}

double required_float(const Node& node, const char* name) {
  if (!node.has_attr(name)) fail(node, std::string("missing required attribute '") + name + "'");
  return node.attr_float(name, 0.0);
}

OpDef adagrad_op() {
  return optimizer_op({"Adagrad", 1,
                       [](const Node& node) -> OptimizerRule {
                         double decay = node.attr_float("decay_factor", 0.0);
                         double epsilon = node.attr_float("epsilon", 1e-6);
                         double norm = node.attr_float("norm_coefficient", 0.0);
                         return [=](double r, int64_t t, double x, double g, double* h) {
                           double rate = r / (1.0 + static_cast<double>(t) * decay);
                           double g_reg = norm * x + g;
                           h[0] += g_reg * g_reg;
                           return x - rate * g_reg / (std::sqrt(h[0]) + epsilon);
                         };
                       },
                       11.0});
}

// Momentum: the gradient's coefficient is 1 on the first update (T = 0), beta afterwards.
OpDef momentum_op() {
  return optimizer_op({"Momentum", 1,
                       [](const Node& node) -> OptimizerRule {
                         double alpha = required_float(node, "alpha");
                         double beta = required_float(node, "beta");
                         double norm = required_float(node, "norm_coefficient");
                         std::string mode = node.attr_string("mode", "");
                         if (mode != "standard" && mode != "nesterov")
                           fail(node, "mode must be 'standard' or 'nesterov', got '" + mode + "'");
                         bool nesterov = mode == "nesterov";
                         return [=](double r, int64_t t, double x, double g, double* v) {
                           double g_reg = norm * x + g;
                           v[0] = alpha * v[0] + (t > 0 ? beta : 1.0) * g_reg;
                           return nesterov ? x - r * (g_reg + alpha * v[0]) : x - r * v[0];
                         };
                       },
                       9.0});
}

OpDef adam_op() {
  return optimizer_op({"Adam", 2,
                       [](const Node& node) -> OptimizerRule {
                         double alpha = node.attr_float("alpha", 0.9);
                         double beta = node.attr_float("beta", 0.999);
                         double epsilon = node.attr_float("epsilon", 1e-6);
                         double norm = node.attr_float("norm_coefficient", 0.0);
                         double norm_post = node.attr_float("norm_coefficient_post", 0.0);
                         return [=](double r, int64_t t, double x, double g, double* vh) {
                           double g_reg = norm * x + g;
                           vh[0] = alpha * vh[0] + (1.0 - alpha) * g_reg;
                           vh[1] = beta * vh[1] + (1.0 - beta) * g_reg * g_reg;
                           // Bias correction applies from the second update on.
                           double rate = r;
                           if (t > 0) {
                             double tt = static_cast<double>(t);
                             rate = r * std::sqrt(1.0 - std::pow(beta, tt)) / (1.0 - std::pow(alpha, tt));
                           }
                           double x_new = x - rate * vh[0] / (std::sqrt(vh[1]) + epsilon);
                           return (1.0 - norm_post) * x_new;
                         };
                       },
                       16.0});
}

}  // namespace
}  // namespace misc

void register_misc_ops(OpRegistry& r) {
  using namespace misc;
  r.add(det_op());
  r.add(bitcast_op());
  r.add(swiglu_op());
  r.add(tensor_scatter_op());
  r.add(binarizer_op());
  r.add(array_feature_extractor_op());
  r.add(adagrad_op());
  r.add(momentum_op());
  r.add(adam_op());
  register_sampling_ops(r);
  register_dynamic_shape_ops(r);
}

}  // namespace kiln
