// Ops that run a runtime kernel (scheduler/lower/extern_calls.h), compiled and run against the
// reference where conformance data does not reach: RoiAlign sampled by run-time ROIs (sampling_ratio
// 0), in both modes and coordinate conventions, with ROIs larger than the map, degenerate and
// reversed ones, and int32 batch indices.
#include "scheduler/lower/extern_calls.h"

#include <gtest/gtest.h>

#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

ModelBuilder roi_align(const std::string& mode, const std::string& coordinates, DType index_dtype) {
  ModelBuilder b("roi_align", 16);
  b.input("x", DType::Float32, Shape{2, 3, 9, 7});
  b.input("rois", DType::Float32, Shape{5, 4});
  b.input("batch", index_dtype, Shape{5});
  b.node("RoiAlign", {"x", "rois", "batch"}, {"y"}, "align")
      .attr("mode", mode)
      .attr("coordinate_transformation_mode", coordinates)
      .attr("output_height", int64_t{3})
      .attr("output_width", int64_t{2})
      .attr("sampling_ratio", int64_t{0})
      .attr("spatial_scale", 0.5);
  b.output("y", DType::Float32, Shape{5, 3, 3, 2});
  return b;
}

TEST(ExternCalls, RoiAlignOverRunTimeRoisMatchesTheReference) {
  // (x1, y1, x2, y2) at twice the map's scale: small, the whole map, past it, degenerate, reversed.
  const Tensor rois = Tensor::from_doubles(DType::Float32, {5, 4},
                                           std::vector<double>{2, 2, 6, 8, 0, 0, 14, 18, -4, -6, 30, 40, 5, 5, 5, 5, 9, 9, 3, 1});
  for (const std::string mode : {"avg", "max"})
    for (const std::string coordinates : {"half_pixel", "output_half_pixel"})
      for (DType index : {DType::Int64, DType::Int32}) {
        ModelBuilder b = roi_align(mode, coordinates, index);
        testing::TempDir dir;
        const testing::HostPackage pkg(b, dir);
        const std::map<std::string, Tensor> in = {
            {"x", testing::random_weights({2, 3, 9, 7}, 7)},
            {"rois", rois},
            {"batch", Tensor::from_ints(index, {5}, std::vector<int64_t>{0, 1, 1, 0, 1})}};
        SCOPED_TRACE(mode + " " + coordinates + " " + dtype_name(index));
        testing::expect_same_outputs(run_reference(pkg.graph(), in), pkg.run(in));
        EXPECT_NE(testing::read_file(dir.path("pkg") + "/model.json").find("kiln_rt_roialign"), std::string::npos);
      }
}

}  // namespace
}  // namespace kiln
