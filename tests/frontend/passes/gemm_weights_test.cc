#include "frontend/passes/gemm_weights.h"

#include <gtest/gtest.h>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::prepared_graph;
using testing::random_weights;

// nn.Linear's export: y = x B^T + c with B constant (N x K). B is stored transposed and read with
// transB = 0; the outputs are the same. A B computed at run time stays as it is.
TEST(TransposeGemmWeights, AConstantTransposedBIsStoredTransposed) {
  ModelBuilder b("linear", 13);
  b.input("x", DType::Float32, Shape{2, 5});
  b.input("w", DType::Float32, Shape{4, 3});
  b.initializer("fc.weight", random_weights({3, 5}, 1));
  b.initializer("fc.bias", random_weights({3}, 2));
  b.node("Gemm", {"x", "fc.weight", "fc.bias"}, {"y"}).attr("transB", int64_t{1});
  b.node("Gemm", {"y", "w"}, {"z"}).attr("transB", int64_t{1});
  b.output("z", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  const std::shared_ptr<const Tensor> w = g.value("fc.weight").constant;
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(testing::rewrite_and_compare(g, transpose_gemm_weights), 1);
  EXPECT_EQ(g.nodes[0].attr_int("transB", 1), 0);
  EXPECT_EQ(g.value(g.nodes[0].inputs[1]).shape, (Shape{5, 3}));
  const Tensor* t = g.constant_input(g.nodes[0], 1);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->get_double(1 * 3 + 2), w->get_double(2 * 5 + 1));  // element (k 1, n 2) was (n 2, k 1)
  EXPECT_EQ(g.nodes[1].attr_int("transB", 0), 1);
}

// Two Gemms sharing one constant B (tied weights) share its one transposed copy.
TEST(TransposeGemmWeights, ASharedBIsTransposedOnce) {
  ModelBuilder b("tied", 13);
  b.input("x", DType::Float32, Shape{2, 5});
  b.initializer("w", random_weights({5, 5}, 1));
  b.node("Gemm", {"x", "w"}, {"y"}).attr("transB", int64_t{1});
  b.node("Gemm", {"y", "w"}, {"z"}).attr("transB", int64_t{1});
  b.output("z", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(testing::rewrite_and_compare(g, transpose_gemm_weights), 2);
  EXPECT_EQ(g.nodes[0].inputs[1], g.nodes[1].inputs[1]);
}

}  // namespace
}  // namespace kiln
