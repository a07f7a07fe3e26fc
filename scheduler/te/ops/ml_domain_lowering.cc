// The ai.onnx.ml ops as tensor expressions: Binarizer and ArrayFeatureExtractor.
#include <functional>
#include <string>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te::misc {
namespace {

// 1 where x > threshold, else 0; compared in double like the reference (any numeric dtype).
void lower_binarizer(LowerContext& c) {
  DType t = c.out_dtype(0);
  double threshold = c.node().attr_float("threshold", 0.0);
  const TensorRef& x = c.input(0);
  c.set_output(0, compute(c.name(), "elementwise", t, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    Expr above = cast(DType::Float64, at(x, idx)) > fimm(threshold, DType::Float64);
    return select(above, const_of(t, 1), const_of(t, 0));
  }));
}

// Y[..., j] = X[..., indices.flat[j]]; the indices are data, so they are wrapped and clamped.
void lower_array_feature_extractor(LowerContext& c) {
  const TensorRef& x = c.input(0);
  const TensorRef& ind = c.input(1);
  const Shape& out_shape = c.out_shape(0);
  int64_t n = c.shape(0).back();
  std::vector<int64_t> strides(ind->shape.size(), 1);
  for (size_t a = ind->shape.size(); a-- > 1;) strides[a - 1] = strides[a] * ind->shape[a];
  c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), out_shape, [&](const std::vector<Expr>& idx) {
    // Unravel the flat position j into the indices tensor's coordinates.
    Expr j = idx.back();
    std::vector<Expr> ii;
    for (size_t a = 0; a < ind->shape.size(); ++a)
      ii.push_back(floormod(floordiv(j, int_imm(strides[a])), int_imm(ind->shape[a])));
    Expr k = cast(DType::Int64, at(ind, ii));
    k = select(k < int_imm(0), k + n, k);
    std::vector<Expr> src;
    if (c.rank(0) > 1) src.assign(idx.begin(), idx.end() - 1);  // a 1-D X gave a leading axis of 1
    src.push_back(clamp_index(k, n));
    return at(x, src);
  }));
}

}  // namespace

void register_ml_domain_lowerings(LoweringRegistry& r) {
  r.add({"Binarizer", "ai.onnx.ml", lower_binarizer});
  r.add({"ArrayFeatureExtractor", "ai.onnx.ml", lower_array_feature_extractor});
}

}  // namespace kiln::te::misc
