#include "frontend/onnx/onnx_import.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/ir/error.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

Graph import(ModelBuilder& b) { return import_onnx_bytes(b.serialize(), "test.onnx"); }
Graph import_lenient(ModelBuilder& b) { return import_onnx_bytes(b.serialize(), "test.onnx", {.onnx_checker = false}); }

TEST(OnnxImport, ReadsInputsNodesAndAttributes) {
  ModelBuilder b("g", 13);
  b.input("x", DType::Float32, std::vector<Dim>{{-1, "batch"}, {4, ""}});
  b.node("LeakyRelu", {"x"}, {"y"}, "lr").attr("alpha", 0.25);
  b.output("y", DType::Float32, Shape{1, 4});
  Graph g = import(b);
  ASSERT_EQ(g.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g.value("x").dtype, DType::Float32);
  EXPECT_EQ(dims_str(g.declared_input_dims.at("x")), "batchx4");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].opset, 13);
  EXPECT_DOUBLE_EQ(g.nodes[0].attr_float("alpha", 0), 0.25);
  EXPECT_THROW(g.nodes[0].attr_int("alpha", 0), Error);  // wrong kind is an error, not a silent default
}

TEST(OnnxImport, InitializersFromRawAndTypedFields) {
  ModelBuilder b = testing::relu_model();
  auto* graph = b.proto().mutable_graph();
  auto* f = graph->add_initializer();  // typed float_data
  f->set_name("f");
  f->set_data_type(onnx::TensorProto::FLOAT);
  f->add_dims(2);
  f->add_float_data(1.5f);
  f->add_float_data(-2.0f);
  auto* i8 = graph->add_initializer();  // int8 travels in int32_data
  i8->set_name("i8");
  i8->set_data_type(onnx::TensorProto::INT8);
  i8->add_dims(1);
  i8->add_int32_data(-7);
  auto* h = graph->add_initializer();  // float16 bit patterns in int32_data
  h->set_name("h");
  h->set_data_type(onnx::TensorProto::FLOAT16);
  h->add_int32_data(0x3c00);  // 1.0, rank 0
  b.initializer("raw", Tensor::from_ints(DType::Int64, {3}, std::vector<int64_t>{1, -2, 3}));
  Graph g = import(b);
  EXPECT_EQ(g.value("f").constant->to_doubles(), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(g.value("i8").constant->get_int(0), -7);
  EXPECT_EQ(g.value("h").constant->get_double(0), 1.0);
  EXPECT_EQ(g.value("raw").constant->to_ints(), (std::vector<int64_t>{1, -2, 3}));
}

TEST(OnnxImport, SortsNodesTopologically) {
  ModelBuilder b("g", 13);
  b.input("x", DType::Float32, Shape{2});
  b.node("Relu", {"a"}, {"y"}, "second");
  b.node("Relu", {"x"}, {"a"}, "first");
  b.output("y", DType::Float32, Shape{2});
  Graph g = import(b);  // libonnx's checker runs on the sorted graph, so it accepts this too
  EXPECT_EQ(g.nodes[0].name, "first");
  EXPECT_EQ(g.nodes[1].name, "second");
}

TEST(OnnxImport, InitializerListedAsInputIsAConstant) {
  ModelBuilder b = testing::relu_model();
  b.initializer("w", Tensor::scalar_double(DType::Float32, 2.0));
  b.input("w", DType::Float32, Shape{});
  Graph g = import(b);
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
  EXPECT_NE(g.value("w").constant, nullptr);
}

TEST(OnnxImport, UntypedAttributeFallsBackToTheFilledField) {
  ModelBuilder b = testing::relu_model();
  auto* a = b.proto().mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("legacy");
  a->set_i(3);  // no `type`, as some old exporters write
  Graph g = import_lenient(b);
  EXPECT_EQ(g.nodes[0].attr_int("legacy", 0), 3);
}

TEST(OnnxImport, RejectsWhatItDoesNotClaim) {
  {
    ModelBuilder b = testing::relu_model();
    b.proto().mutable_opset_import(0)->set_version(99);
    EXPECT_THROW(import(b), Unsupported);
  }
  {
    ModelBuilder b = testing::relu_model();
    b.proto().mutable_graph()->mutable_node(0)->set_op_type("NoSuchOp");
    try {
      import(b);
      FAIL() << "expected Unsupported";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("the_relu"), std::string::npos) << e.what();
    }
  }
  {
    // kiln's own ops are made by its passes; a model may not name them (a StepLoop's body it made
    // would not keep the loop's contract).
    ModelBuilder b = testing::relu_model();
    auto* op = b.proto().add_opset_import();
    op->set_domain("kiln");
    op->set_version(1);
    b.proto().mutable_graph()->mutable_node(0)->set_domain("kiln");
    b.proto().mutable_graph()->mutable_node(0)->set_op_type("StepLoop");
    try {
      import(b);
      FAIL() << "expected Unsupported";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("node 'the_relu' (StepLoop): op kiln.StepLoop is kiln's own"), std::string::npos)
          << e.what();
    }
  }
  {
    ModelBuilder b = testing::relu_model();
    auto* t = b.proto().mutable_graph()->add_initializer();
    t->set_name("ext");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    EXPECT_THROW(import(b), Error);
  }
}

// A model may import only another domain (ai.onnx.ml, training): its default-domain nodes are then
// an error naming the domain, never a lookup of an opset that is not there.
TEST(OnnxImport, DefaultDomainNodesInAModelImportingOnlyOtherDomainsAreAnError) {
  ModelBuilder b = testing::relu_model();
  b.proto().mutable_opset_import(0)->set_domain("ai.onnx.ml");
  b.proto().mutable_opset_import(0)->set_version(3);
  try {
    import(b);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("domain '' is not imported"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, GarbageIsAnErrorNotACrash) {
  EXPECT_THROW(import_onnx_bytes(std::string("\xff\xff\xff\xff garbage", 13), "junk"), Error);
  EXPECT_THROW(import_onnx_bytes("", "empty"), Error);  // no graph
}

}  // namespace
}  // namespace kiln
