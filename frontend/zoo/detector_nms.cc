// detector_nms: a small one-scale anchor-free detector in the layout YOLOv8 exports ([batch, 4 +
// classes, anchors]: box centre and size, then class scores per anchor), with its post-processing in
// the graph as end-to-end exports write it: NonMaxSuppression over every class (at most 20 boxes per
// class, IoU 0.5, score 0.5), then each kept box, its score and its class gathered into
// detections [kept, 6] = (cx, cy, w, h, score, class). How many boxes survive is decided at run time
// (frontend/passes/bound_run_time_shapes.h), which is the point of the model.
// A backbone of four 3x3 convs (stride 2, 2, 2, 1) to an 1/8-scale grid of `size`/8 x `size`/8
// anchors (size 128 by default: 256 anchors), 8 classes. Box coordinates are rounded to whole pixels
// and scores to 1/32, so that kiln and ONNX Runtime, whose arithmetic differs in the last bit, meet
// the same score ties and the same IoU comparisons: a comparison with ORT checks the suppression (and
// its tie-breaking), not rounding luck.
// Outputs: selected [kept, 3] (batch, class, anchor) and detections [kept, 6].
#include "frontend/ir/error.h"
#include "frontend/zoo/cnn_layers.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {

ModelBuilder build_detector_nms(const ZooOptions& o) {
  constexpr int64_t kClasses = 8, kStride = 8, kMaxPerClass = 20;
  const int64_t size = o.size ? o.size : 128;
  if (size % kStride != 0) throw Error("detector_nms: --size must be a multiple of 8, got " + std::to_string(size));
  const int64_t grid = size / kStride, anchors = grid * grid;
  ModelBuilder b("detector_nms", 17);
  WeightInit w(o.seed);
  CnnBuilder cnn(b, w);
  FeatureMap x = cnn.input("images", o.batch, 3, {size, size});
  const std::vector<std::pair<int64_t, int64_t>> stages = {{16, 2}, {32, 2}, {64, 2}, {64, 1}};
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string name = "backbone." + std::to_string(i);
    x = cnn.relu(cnn.conv(x, name, {stages[i].first, {3, 3}, {stages[i].second, stages[i].second}, {1, 1}, 1, true}),
                 name + ".relu");
  }
  FeatureMap head = cnn.conv(x, "head", {4 + kClasses, {1, 1}, {}, {}, 1, true});

  auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
    b.initializer(name, Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v));
    return name;
  };
  auto floats = [&](const std::string& name, Shape shape, const std::vector<double>& v) {
    b.initializer(name, Tensor::from_doubles(DType::Float32, std::move(shape), v));
    return name;
  };
  b.node("Reshape", {head.name, ints("head_shape", {o.batch, 4 + kClasses, anchors})}, {"raw"});
  auto rows = [&](const std::string& out, int64_t from, int64_t to) {
    b.node("Slice", {"raw", ints(out + ".start", {from}), ints(out + ".end", {to}), ints(out + ".axis", {1})}, {out});
  };
  rows("txy", 0, 2);
  rows("twh", 2, 4);
  rows("tcls", 4, 4 + kClasses);
  // Centres: the anchor's cell centre moved by up to half a cell; sizes: up to 6 cells. Whole pixels.
  std::vector<double> centres;
  for (int64_t axis = 0; axis < 2; ++axis)
    for (int64_t a = 0; a < anchors; ++a) centres.push_back((axis == 0 ? a % grid : a / grid) + 0.5);
  b.node("Sigmoid", {"txy"}, {"sxy"});
  b.node("Add", {"sxy", floats("centres", {1, 2, anchors}, centres)}, {"cells"});
  b.node("Sub", {"cells", floats("half", {1}, {0.5})}, {"cells_c"});
  b.node("Mul", {"cells_c", floats("stride", {1}, {double(kStride)})}, {"xy_f"});
  b.node("Round", {"xy_f"}, {"xy"});
  b.node("Sigmoid", {"twh"}, {"swh"});
  b.node("Mul", {"swh", floats("box_scale", {1}, {6.0 * kStride})}, {"wh_f"});
  b.node("Round", {"wh_f"}, {"wh"});
  b.node("Concat", {"xy", "wh"}, {"boxes_t"}).attr("axis", int64_t{1});
  b.node("Transpose", {"boxes_t"}, {"boxes"}).attr("perm", std::vector<int64_t>{0, 2, 1});
  b.node("Sigmoid", {"tcls"}, {"probs"});
  b.node("Mul", {"probs", floats("levels", {1}, {32})}, {"probs_32"});
  b.node("Floor", {"probs_32"}, {"steps"});
  b.node("Div", {"steps", "levels"}, {"scores"});

  b.initializer("max_per_class", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{kMaxPerClass}));
  b.node("NonMaxSuppression",
         {"boxes", "scores", "max_per_class", floats("iou_threshold", {1}, {0.5}), floats("score_threshold", {1}, {0.5})},
         {"selected"}, "nms")
      .attr("center_point_box", int64_t{1});
  // Each kept row's box and score, found by flat index into [batch * anchors, 4] and
  // [batch * classes * anchors].
  auto column = [&](const std::string& out, int64_t c) {
    b.initializer(out + ".column", Tensor::scalar_int(DType::Int64, c));
    b.node("Gather", {"selected", out + ".column"}, {out}).attr("axis", int64_t{1});
  };
  column("batch_index", 0);
  column("class_index", 1);
  column("anchor_index", 2);
  b.initializer("anchors", Tensor::scalar_int(DType::Int64, anchors));
  b.initializer("classes", Tensor::scalar_int(DType::Int64, kClasses));
  b.node("Mul", {"batch_index", "anchors"}, {"box_base"});
  b.node("Add", {"box_base", "anchor_index"}, {"box_row"});
  b.node("Reshape", {"boxes", ints("box_rows", {o.batch * anchors, 4})}, {"all_boxes"});
  b.node("Gather", {"all_boxes", "box_row"}, {"kept_boxes"}).attr("axis", int64_t{0});
  b.node("Mul", {"batch_index", "classes"}, {"class_base"});
  b.node("Add", {"class_base", "class_index"}, {"class_row"});
  b.node("Mul", {"class_row", "anchors"}, {"score_base"});
  b.node("Add", {"score_base", "anchor_index"}, {"score_at"});
  b.node("Reshape", {"scores", ints("flat", {-1})}, {"all_scores"});
  b.node("Gather", {"all_scores", "score_at"}, {"kept_scores"}).attr("axis", int64_t{0});
  b.node("Unsqueeze", {"kept_scores", ints("column_axis", {1})}, {"score_column"});
  b.node("Cast", {"class_index"}, {"class_f"}).attr("to", int64_t{1});
  b.node("Unsqueeze", {"class_f", "column_axis"}, {"class_column"});
  b.node("Concat", {"kept_boxes", "score_column", "class_column"}, {"detections"}).attr("axis", int64_t{1});
  b.output("selected", DType::Int64, {Dim{-1, "kept"}, Dim{3, ""}});
  b.output("detections", DType::Float32, {Dim{-1, "kept"}, Dim{6, ""}});
  return b;
}

}  // namespace kiln
