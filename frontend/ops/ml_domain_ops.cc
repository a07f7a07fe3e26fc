// The ai.onnx.ml ops kiln supports: Binarizer and ArrayFeatureExtractor.
#include <cstring>

#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

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

}  // namespace

void register_ml_domain_ops(OpRegistry& r) {
  r.add(binarizer_op());
  r.add(array_feature_extractor_op());
}

}  // namespace kiln::misc
