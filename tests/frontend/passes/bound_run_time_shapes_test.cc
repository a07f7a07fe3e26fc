// Ops whose output extent is decided at run time (frontend/passes/bound_run_time_shapes.h): NMS,
// NonZero and a TopK with a run-time k get a bound and a count output, the extent is carried through
// a detector's post-processing (Gather, Squeeze, element-wise ops) to the graph outputs, the compiled
// runtime kernels agree with the reference on random data (ties included), the counted entries equal
// what the op computes with the inputs frozen, and a node that would mix rows past the count is
// refused naming it.
#include "frontend/passes/bound_run_time_shapes.h"

#include <gtest/gtest.h>

#include <random>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

constexpr int64_t kBoxes = 40, kClasses = 3;

// A detector's tail: NMS over boxes [1, 40, 4] and scores [1, 3, 40] with the thresholds as inputs,
// then each kept box and its score gathered, shifted by 1 (an element-wise op on the kept rows).
ModelBuilder detector_tail() {
  ModelBuilder b("detector_tail");
  b.input("boxes", DType::Float32, Shape{1, kBoxes, 4});
  b.input("scores", DType::Float32, Shape{1, kClasses, kBoxes});
  b.input("iou", DType::Float32, Shape{1});
  b.input("floor", DType::Float32, Shape{1});
  b.initializer("max_per_class", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{5}));
  b.initializer("box_column", Tensor::scalar_int(DType::Int64, 2));
  b.initializer("one", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{1}));
  b.node("NonMaxSuppression", {"boxes", "scores", "max_per_class", "iou", "floor"}, {"selected"}, "nms");
  b.node("Gather", {"selected", "box_column"}, {"box_index"}).attr("axis", int64_t{1});
  b.node("Squeeze", {"boxes"}, {"all_boxes"});
  b.node("Gather", {"all_boxes", "box_index"}, {"kept"}).attr("axis", int64_t{0});
  b.node("Add", {"kept", "one"}, {"shifted"});
  b.output("selected", DType::Int64, Shape{});
  b.output("shifted", DType::Float32, Shape{});
  return b;
}

// Random boxes with repeated scores (ties) and overlapping neighbours.
std::map<std::string, Tensor> detector_inputs(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> boxes, scores;
  for (int64_t i = 0; i < kBoxes; ++i) {
    const double y = u(rng) * 4, x = u(rng) * 4;
    boxes.insert(boxes.end(), {y, x, y + 1 + u(rng), x + 1 + u(rng)});
  }
  for (int64_t i = 0; i < kClasses * kBoxes; ++i) scores.push_back(std::floor(u(rng) * 8) / 8);
  return {{"boxes", Tensor::from_doubles(DType::Float32, {1, kBoxes, 4}, boxes)},
          {"scores", Tensor::from_doubles(DType::Float32, {1, kClasses, kBoxes}, scores)},
          {"iou", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{0.3})},
          {"floor", Tensor::from_doubles(DType::Float32, {1}, std::vector<double>{0.25})}};
}

// The first `count` rows of `t`, as doubles.
std::vector<double> leading_rows(const Tensor& t, int64_t count) {
  const int64_t row = t.size() / t.shape()[0];
  std::vector<double> v = t.to_doubles();
  v.resize(static_cast<size_t>(count * row));
  return v;
}

TEST(BoundRunTimeShapes, ADetectorTailCompilesWithCountsThatAgreeWithTheFrozenModel) {
  ModelBuilder b = detector_tail();
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const Graph& g = pkg.graph();
  EXPECT_EQ(g.model_outputs, (std::vector<std::string>{"selected", "shifted"}));
  EXPECT_EQ(g.outputs, (std::vector<std::string>{"selected", "shifted", "selected.count", "shifted.count"}));
  EXPECT_EQ(g.value("selected").shape, (Shape{kClasses * 5, 3}));  // 3 classes x min(40, 5)
  EXPECT_EQ(g.count_outputs.at("shifted").axis, 0);
  Graph again = g;  // inference runs again after the recurrent expansion: no second count output
  infer_shapes(again);
  EXPECT_EQ(again.outputs, g.outputs);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::map<std::string, Tensor> in = detector_inputs(seed);
    const std::vector<Tensor> want = run_reference(g, in);
    const std::vector<Tensor> got = pkg.run(in);
    ASSERT_EQ(got.size(), 4u);
    const int64_t count = want[2].get_int(0);
    EXPECT_EQ(got[2].get_int(0), count) << "seed " << seed;
    EXPECT_EQ(got[3].get_int(0), count);
    EXPECT_GT(count, 0);
    EXPECT_EQ(leading_rows(got[0], count), leading_rows(want[0], count)) << "seed " << seed;
    EXPECT_EQ(leading_rows(got[1], count), leading_rows(want[1], count)) << "seed " << seed;

    // With every input frozen, NMS folds to its exact result: the counted rows are that result.
    ShapeBindings frozen;
    for (const auto& [name, t] : in) frozen.frozen[name] = t;
    Graph exact = import_onnx_bytes(b.serialize(), "detector.onnx");
    bind_input_shapes(exact, frozen);
    infer_shapes(exact);
    ASSERT_TRUE(exact.value("selected").constant);
    EXPECT_EQ(exact.value("selected").shape[0], count);
    EXPECT_EQ(exact.value("selected").constant->to_doubles(), leading_rows(want[0], count));
  }
}

TEST(BoundRunTimeShapes, ATopKWithARunTimeKSortsTheAxisAndCountsK) {
  ModelBuilder b("topk");
  b.input("x", DType::Float32, Shape{2, 6});
  b.input("k", DType::Int64, Shape{1});
  b.node("TopK", {"x", "k"}, {"values", "indices"}, "top").attr("axis", int64_t{1});
  b.output("values", DType::Float32, Shape{});
  b.output("indices", DType::Int64, Shape{});
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  EXPECT_EQ(pkg.graph().value("values").shape, (Shape{2, 6}));
  const Tensor x = Tensor::from_doubles(DType::Float32, {2, 6}, std::vector<double>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8});
  for (int64_t k : {0, 2, 6, 9}) {
    const std::map<std::string, Tensor> in = {{"x", x}, {"k", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{k})}};
    const std::vector<Tensor> got = pkg.run(in);
    testing::expect_same_outputs(run_reference(pkg.graph(), in), got);
    EXPECT_EQ(got[2].get_int(0), std::min<int64_t>(k, 6));
    EXPECT_EQ(got[0].get_double(0), 9);
    EXPECT_EQ(got[1].get_int(6), 5);  // row 1's largest, 8, at position 5
  }
}

TEST(BoundRunTimeShapes, NonZeroOfARunTimeInputCountsItsNonzeros) {
  ModelBuilder b("nonzero");
  b.input("x", DType::Int32, Shape{2, 3});
  b.node("NonZero", {"x"}, {"where"});
  b.output("where", DType::Int64, Shape{});
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  EXPECT_EQ(pkg.graph().count_outputs.at("where").axis, 1);
  const Tensor x = Tensor::from_ints(DType::Int32, {2, 3}, std::vector<int64_t>{0, 7, 0, -2, 0, 1});
  const std::vector<Tensor> got = pkg.run({{"x", x}});
  testing::expect_same_outputs(run_reference(pkg.graph(), {{"x", x}}), got);
  EXPECT_EQ(got[1].get_int(0), 3);
  EXPECT_EQ(got[0].to_doubles(), (std::vector<double>{0, 1, 1, 0, 0, 0, 1, 0, 2, 0, 0, 0}));
}

// Unique of a run-time input, flat and along an axis, sorted and by first appearance: the package's
// counted entries equal the reference's on data with many repeats.
TEST(BoundRunTimeShapes, UniqueOfARunTimeInputCountsItsDistinctSlices) {
  std::mt19937 rng(5);
  std::vector<int64_t> values;
  for (int i = 0; i < 2 * 9; ++i) values.push_back(static_cast<int64_t>(rng() % 2) * 2 - 1);  // 4 column kinds
  const Tensor x = Tensor::from_ints(DType::Int32, {2, 9}, values);
  for (int axis : {-1, 1})
    for (int64_t sorted : {1, 0}) {
      ModelBuilder b("unique");
      b.input("x", DType::Int32, Shape{2, 9});
      auto node = b.node("Unique", {"x"}, {"y", "indices", "inverse", "counts"});
      node.attr("sorted", sorted);
      if (axis >= 0) node.attr("axis", int64_t{axis});
      for (const char* out : {"y", "indices", "inverse", "counts"}) b.output(out, DType::Int64, Shape{});
      testing::TempDir dir;
      const testing::HostPackage pkg(b, dir);
      const std::vector<Tensor> want = run_reference(pkg.graph(), {{"x", x}});
      const std::vector<Tensor> got = pkg.run({{"x", x}});
      SCOPED_TRACE("axis " + std::to_string(axis) + " sorted " + std::to_string(sorted));
      ASSERT_EQ(got.size(), 7u);  // and the counts of y, indices and counts
      const int64_t found = want[4].get_int(0);
      EXPECT_GT(found, 1);
      EXPECT_LT(found, 9);
      for (size_t i = 0; i < 7; ++i) {
        EXPECT_EQ(got[i].to_doubles(), want[i].to_doubles()) << "output " << i;
      }
    }
}

std::string inference_error(ModelBuilder& b) {
  try {
    Graph g = import_onnx_bytes(b.serialize(), "detector.onnx");
    bind_input_shapes(g, {});
    infer_shapes(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BoundRunTimeShapes, ANodeMixingRowsPastTheCountIsRefusedByName) {
  ModelBuilder sum = detector_tail();
  sum.node("ReduceSum", {"shifted"}, {"total"}, "total");
  sum.output("total", DType::Float32, Shape{});
  EXPECT_NE(inference_error(sum).find("node 'total' (ReduceSum): reads 'shifted', whose extent along axis 0 is decided at "
                                      "run time (by node 'nms' (NonMaxSuppression))"),
            std::string::npos)
      << inference_error(sum);

  ModelBuilder along = detector_tail();
  along.initializer("first", Tensor::scalar_int(DType::Int64, 0));
  along.node("Gather", {"selected", "first"}, {"row0"}, "row0").attr("axis", int64_t{0});
  along.output("row0", DType::Int64, Shape{});
  EXPECT_NE(inference_error(along).find("node 'row0' (Gather): reads 'selected', whose extent along axis 0 is decided at run "
                                        "time (by node 'nms' (NonMaxSuppression)), and gathers along that axis"),
            std::string::npos)
      << inference_error(along);

  ModelBuilder stacked = detector_tail();
  stacked.node("Concat", {"shifted", "shifted"}, {"twice"}, "twice").attr("axis", int64_t{0});
  stacked.output("twice", DType::Float32, Shape{});
  EXPECT_NE(inference_error(stacked).find("node 'twice' (Concat): reads 'shifted'"), std::string::npos)
      << inference_error(stacked);
}

}  // namespace
}  // namespace kiln
