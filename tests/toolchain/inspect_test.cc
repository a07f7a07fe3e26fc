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

// A sequence input is summarised by its tensors, each declared as part of the sequence; unbound, it
// is the one-line error that names the flag.
TEST(Inspect, ASequenceInputIsSummarisedByItsTensors) {
  testing::TempDir dir;
  ModelBuilder b("seq");
  b.composite_input("s", CompositeType{{ValueKind::Sequence}, DType::Float32, false, {}});
  b.node("ConcatFromSequence", {"s"}, {"y"}).attr("axis", int64_t{0});
  b.output("y", DType::Float32, Shape{});
  b.save(dir.path("m.onnx"));
  ShapeBindings bindings;
  bindings.composite.insert(parse_sequence_shapes("s=2;3"));
  const ModelSummary s = summarize_model(dir.path("m.onnx"), bindings, false);
  ASSERT_EQ(s.inputs.size(), 2u);
  EXPECT_EQ(s.inputs[1].name, "s.1");
  EXPECT_EQ(s.inputs[1].declared, "part of sequence(tensor(float32))");
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].shape, Shape{5});
  try {
    summarize_model(dir.path("m.onnx"), {}, false);
    FAIL() << "an unbound sequence input was summarised";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bind the tensors it holds (--sequence s=SHAPE;SHAPE;...)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
