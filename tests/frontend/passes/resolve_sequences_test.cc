// Sequences and optionals resolved at compile time (frontend/passes/resolve_sequences.h): the ops
// become aliasing and tensor ops, sequence and optional graph inputs and outputs become the tensors
// they hold, a run-time If merges sequences of one structure, and a bad position, an empty optional
// read or a structure only a run-time value could decide are errors naming the node.
#include "frontend/passes/resolve_sequences.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

const Tensor kRows = Tensor::from_doubles(DType::Float32, {3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6});

Tensor floats(const Shape& shape, const std::vector<double>& v) { return Tensor::from_doubles(DType::Float32, shape, v); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.get_double(i));
  return v;
}

Graph inferred(ModelBuilder& b, const ShapeBindings& bindings = {}) {
  Graph g = import_onnx_bytes(b.serialize(), "seq.onnx");
  bind_input_shapes(g, bindings);
  infer_shapes(g);
  return g;
}

std::string inference_error(ModelBuilder& b, const ShapeBindings& bindings = {}) {
  try {
    inferred(b, bindings);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// x [3, 2] split into rows; row 1 erased, row 0 inserted in front, the length counted, and the rows
// stacked again along a new axis: [[1, 2], [1, 2], [5, 6]].
ModelBuilder split_edit_concat() {
  ModelBuilder b("split_edit_concat");
  b.input("x", DType::Float32, Shape{3, 2});
  b.initializer("one", Tensor::scalar_int(DType::Int64, 1));
  b.initializer("zero", Tensor::scalar_int(DType::Int64, 0));
  b.node("SplitToSequence", {"x"}, {"rows"}).attr("axis", int64_t{0}).attr("keepdims", int64_t{0});
  b.node("SequenceErase", {"rows", "one"}, {"two_rows"});
  b.node("SequenceAt", {"two_rows", "zero"}, {"first"});
  b.node("SequenceInsert", {"two_rows", "first", "zero"}, {"three_rows"});
  b.node("SequenceLength", {"three_rows"}, {"n"});
  b.node("ConcatFromSequence", {"three_rows"}, {"y"}).attr("axis", int64_t{0}).attr("new_axis", int64_t{1});
  b.output("y", DType::Float32, Shape{3, 2});
  b.output("n", DType::Int64, Shape{});
  return b;
}

TEST(ResolveSequences, SequenceOpsBecomeTensorOpsTheReferenceAndThePackageAgreeOn) {
  ModelBuilder b = split_edit_concat();
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  for (const Node& n : pkg.graph().nodes) EXPECT_FALSE(is_sequence_op(n)) << n.label();
  std::vector<Tensor> want = run_reference(pkg.graph(), {{"x", kRows}});
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(values(want[0]), (std::vector<double>{1, 2, 1, 2, 5, 6}));
  EXPECT_EQ(want[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values(want[1]), std::vector<double>{3});
  testing::expect_same_outputs(want, pkg.run({{"x", kRows}}));
}

TEST(ResolveSequences, SplitSizesAndChunksKeepTheAxis) {
  ModelBuilder b("split_sizes");
  b.input("x", DType::Float32, Shape{3, 2});
  b.initializer("sizes", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{1, 2}));
  b.initializer("chunk", Tensor::scalar_int(DType::Int64, 2));
  b.initializer("last", Tensor::scalar_int(DType::Int64, -1));
  b.node("SplitToSequence", {"x", "sizes"}, {"by_size"}).attr("axis", int64_t{0});
  b.node("SequenceAt", {"by_size", "last"}, {"tail"});
  b.node("SplitToSequence", {"x", "chunk"}, {"by_chunk"}).attr("axis", int64_t{0});
  b.node("SequenceAt", {"by_chunk", "last"}, {"remainder"});
  b.output("tail", DType::Float32, Shape{2, 2});
  b.output("remainder", DType::Float32, Shape{1, 2});
  Graph g = inferred(b);
  std::vector<Tensor> out = run_reference(g, {{"x", kRows}});
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values(out[0]), (std::vector<double>{3, 4, 5, 6}));
  EXPECT_EQ(out[1].shape(), (Shape{1, 2}));
  EXPECT_EQ(values(out[1]), (std::vector<double>{5, 6}));
}

// y = SequenceInsert(s, t): a sequence input bound to two tensors, a sequence output of three.
ModelBuilder sequence_io() {
  ModelBuilder b("sequence_io");
  b.composite_input("s", CompositeType{{ValueKind::Sequence}, DType::Float32, false, {}});
  b.input("t", DType::Float32, Shape{2});
  b.node("SequenceInsert", {"s", "t"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  return b;
}

ShapeBindings two_tensors() {
  ShapeBindings bindings;
  bindings.composite.insert(parse_sequence_shapes("s=2;3"));
  return bindings;
}

TEST(ResolveSequences, SequenceInputsAndOutputsAreTheTensorsTheyHold) {
  ModelBuilder b = sequence_io();
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir, two_tensors());
  const Graph& g = pkg.graph();
  EXPECT_EQ(g.model_inputs, (std::vector<std::string>{"s", "t"}));
  EXPECT_EQ(g.inputs, (std::vector<std::string>{"s.0", "s.1", "t"}));
  EXPECT_EQ(g.io_parts.at("s"), (std::vector<std::string>{"s.0", "s.1"}));
  EXPECT_EQ(g.model_outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(g.outputs, (std::vector<std::string>{"y.0", "y.1", "y.2"}));
  const std::map<std::string, Tensor> in = {
      {"s.0", floats({2}, {1, 2})}, {"s.1", floats({3}, {3, 4, 5})}, {"t", floats({2}, {6, 7})}};
  std::vector<Tensor> want = run_reference(g, in);
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(values(want[1]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(values(want[2]), (std::vector<double>{6, 7}));
  testing::expect_same_outputs(want, pkg.run(in));
}

TEST(ResolveSequences, AnUnboundOrMisboundSequenceInputIsNamed) {
  ModelBuilder b = sequence_io();
  EXPECT_NE(inference_error(b).find("graph input 's' is a sequence(tensor(float32)): bind the tensors it holds (--sequence s="),
            std::string::npos)
      << inference_error(b);
  ShapeBindings wrong;
  wrong.absent.insert("s");
  EXPECT_NE(inference_error(b, wrong).find("--absent s: the graph has no optional input of that name"), std::string::npos);
  EXPECT_THROW(parse_sequence_shapes("s"), Error);
  EXPECT_TRUE(parse_sequence_shapes("s=").second.elements.empty());
}

// has = OptionalHasElement(o); y = OptionalGetElement(o) + 1 when `read`.
ModelBuilder optional_input(bool read) {
  ModelBuilder b("optional_input");
  b.composite_input("o", CompositeType{{ValueKind::Optional}, DType::Float32, true, {Dim{2, ""}}});
  b.initializer("one", floats({1}, {1}));
  b.node("OptionalHasElement", {"o"}, {"has"});
  b.output("has", DType::Bool, Shape{});
  if (read) {
    b.node("OptionalGetElement", {"o"}, {"v"});
    b.node("Add", {"v", "one"}, {"y"});
    b.output("y", DType::Float32, Shape{2});
  }
  return b;
}

TEST(ResolveSequences, AnOptionalInputIsPresentUnlessBoundAbsent) {
  ModelBuilder present = optional_input(true);
  Graph g = inferred(present);
  EXPECT_EQ(g.inputs, std::vector<std::string>{"o.value"});
  std::vector<Tensor> out = run_reference(g, {{"o.value", floats({2}, {1, 2})}});
  EXPECT_EQ(values(out[0]), std::vector<double>{1});
  EXPECT_EQ(values(out[1]), (std::vector<double>{2, 3}));

  ShapeBindings absent;
  absent.absent.insert("o");
  ModelBuilder empty = optional_input(false);
  Graph e = inferred(empty, absent);
  EXPECT_TRUE(e.inputs.empty());
  EXPECT_EQ(values(run_reference(e, {})[0]), std::vector<double>{0});
  ModelBuilder read_empty = optional_input(true);
  EXPECT_NE(inference_error(read_empty, absent).find("node 'v' (OptionalGetElement): the optional 'o' is empty"),
            std::string::npos)
      << inference_error(read_empty, absent);
}

// A branch returning SequenceConstruct(x op c, x) (or only x op c when `short_branch`).
ModelBuilder sequence_branch(const std::string& op, double c, bool short_branch) {
  ModelBuilder b(op + "_branch");
  b.initializer("c", floats({1}, {c}));
  b.node(op, {"x", "c"}, {"r"});
  if (short_branch) b.node("SequenceConstruct", {"r"}, {"s"});
  else b.node("SequenceConstruct", {"r", "x"}, {"s"});
  b.output("s", DType::Float32, Shape{});
  return b;
}

// y = ConcatFromSequence(If(go) then [x + 1, x] else [x * 2, x]); go decided at run time.
ModelBuilder runtime_if_of_sequences(bool lengths_differ) {
  ModelBuilder b("if_sequences");
  b.input("go", DType::Bool, Shape{});
  b.input("x", DType::Float32, Shape{2});
  b.node("If", {"go"}, {"s"}, "choose")
      .attr("then_branch", sequence_branch("Add", 1, false))
      .attr("else_branch", sequence_branch("Mul", 2, lengths_differ));
  b.node("ConcatFromSequence", {"s"}, {"y"}).attr("axis", int64_t{0});
  b.output("y", DType::Float32, Shape{4});
  return b;
}

TEST(ResolveSequences, ARunTimeIfMergesSequencesOfOneLengthTensorByTensor) {
  ModelBuilder b = runtime_if_of_sequences(false);
  testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const Tensor x = floats({2}, {1, 2});
  for (int go : {1, 0}) {
    const std::map<std::string, Tensor> in = {{"go", Tensor::scalar_int(DType::Bool, go)}, {"x", x}};
    std::vector<Tensor> want = run_reference(pkg.graph(), in);
    EXPECT_EQ(values(want[0]), go ? (std::vector<double>{2, 3, 1, 2}) : (std::vector<double>{2, 4, 1, 2}));
    testing::expect_same_outputs(want, pkg.run(in));
  }
}

TEST(ResolveSequences, StructureOnlyARunTimeValueDecidesIsNotConstant) {
  ModelBuilder b = runtime_if_of_sequences(true);
  Graph g = import_onnx_bytes(b.serialize(), "seq.onnx");
  bind_input_shapes(g, {});
  try {
    infer_shapes(g);
    FAIL() << "a run-time If between sequences of 2 and 1 tensors compiled";
  } catch (const NotConstant& e) {
    EXPECT_EQ(e.value_name(), "go");
    EXPECT_NE(std::string(e.what()).find("one branch gives a sequence of 2 values, the other a sequence of 1 values"),
              std::string::npos)
        << e.what();
  }

  ModelBuilder at("runtime_position");
  at.input("x", DType::Float32, Shape{3, 2});
  at.input("i", DType::Int64, Shape{});
  at.node("SplitToSequence", {"x"}, {"rows"});
  at.node("SequenceAt", {"rows", "i"}, {"y"}, "pick");
  at.output("y", DType::Float32, Shape{1, 2});
  Graph h = import_onnx_bytes(at.serialize(), "seq.onnx");
  bind_input_shapes(h, {});
  EXPECT_THROW(infer_shapes(h), NotConstant);
}

TEST(ResolveSequences, BadPositionsAndTensorOpsOnSequencesAreNamed) {
  ModelBuilder far("far");
  far.input("x", DType::Float32, Shape{3, 2});
  far.initializer("five", Tensor::scalar_int(DType::Int64, 5));
  far.node("SplitToSequence", {"x"}, {"rows"});
  far.node("SequenceAt", {"rows", "five"}, {"y"}, "pick");
  far.output("y", DType::Float32, Shape{1, 2});
  EXPECT_NE(inference_error(far).find("node 'pick' (SequenceAt): position 5 is out of range for a sequence of 3 tensors"),
            std::string::npos)
      << inference_error(far);

  ModelBuilder add("add");
  add.input("x", DType::Float32, Shape{3, 2});
  add.node("SplitToSequence", {"x"}, {"rows"});
  add.node("Add", {"rows", "x"}, {"y"}, "plus");
  add.output("y", DType::Float32, Shape{3, 2});
  EXPECT_NE(inference_error(add).find("node 'plus' (Add): input 'rows' is a sequence; the op takes tensors"), std::string::npos)
      << inference_error(add);

  ModelBuilder empty("empty");
  empty.initializer("zero", Tensor::scalar_int(DType::Int64, 0));
  empty.node("SequenceEmpty", {}, {"none"});
  empty.node("SequenceAt", {"none", "zero"}, {"y"}, "pick");
  empty.output("y", DType::Float32, Shape{});
  EXPECT_NE(inference_error(empty).find("node 'pick' (SequenceAt): the sequence 'none' is empty"), std::string::npos)
      << inference_error(empty);

  ModelBuilder sizes("sizes");
  sizes.input("x", DType::Float32, Shape{3, 2});
  sizes.initializer("split", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{1, 1}));
  sizes.node("SplitToSequence", {"x", "split"}, {"rows"}, "split");
  sizes.node("ConcatFromSequence", {"rows"}, {"y"}).attr("axis", int64_t{0});
  sizes.output("y", DType::Float32, Shape{3, 2});
  EXPECT_NE(inference_error(sizes).find("node 'split' (SplitToSequence): split sizes add up to 2, the axis has 3"),
            std::string::npos)
      << inference_error(sizes);
}

}  // namespace
}  // namespace kiln
