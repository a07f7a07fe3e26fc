// `kiln inspect` binds symbolic dims it was not given to 1 so that any model can be summarised; when
// that 1 is what breaks shape inference, the error says so and names the flags that choose another.
#include "toolchain/inspect.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/onnx/model_builder.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

TEST(Inspect, AShapeErrorCausedByADefaultedDimSaysHowToBindIt) {
  testing::TempDir dir;
  ModelBuilder b("sym_reshape", 13);
  b.input("x", DType::Float32, std::vector<Dim>{{-1, "batch"}, {3, ""}});
  b.initializer("target", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{2, 3}));
  b.node("Reshape", {"x", "target"}, {"y"}, "to_2x3");
  b.output("y", DType::Float32, Shape{});
  b.save(dir.path("m.onnx"));
  try {
    summarize_model(dir.path("m.onnx"), {}, false);
    FAIL() << "batch=1 cannot reshape to 2x3";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("to_2x3"), std::string::npos) << what;
    EXPECT_NE(what.find("symbolic dims batch to 1"), std::string::npos) << what;
    EXPECT_NE(what.find("--dim"), std::string::npos) << what;
  }
  ShapeBindings two;
  two.dims["batch"] = 2;
  EXPECT_NO_THROW(summarize_model(dir.path("m.onnx"), two, false));
}

}  // namespace
}  // namespace kiln
