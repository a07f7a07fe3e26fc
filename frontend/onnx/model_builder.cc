#include "frontend/onnx/model_builder.h"

#include <onnx/onnx_pb.h>

#include <fstream>

#include "frontend/ir/error.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln {

using NodeRef = ModelBuilder::NodeRef;

namespace {
onnx::AttributeProto* new_attr(onnx::NodeProto* n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}

// A tensor type of `dtype`; with a shape of `dims` unless `ranked` is false (unknown rank).
void set_tensor_type(onnx::TypeProto* type, DType dtype, const std::vector<Dim>& dims, bool ranked = true) {
  auto* tt = type->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(dtype));
  if (!ranked) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (d.known()) dim->set_dim_value(d.value);
    else if (!d.param.empty()) dim->set_dim_param(d.param);
  }
}

void set_type(onnx::ValueInfoProto* vi, DType dtype, const std::vector<Dim>& dims) { set_tensor_type(vi->mutable_type(), dtype, dims); }

std::vector<Dim> to_dims(const Shape& s) {
  std::vector<Dim> dims;
  for (int64_t v : s) dims.push_back(Dim{v, ""});
  return dims;
}
}  // namespace

NodeRef& NodeRef::attr(const std::string& name, int64_t v) {
  new_attr(n_, name, onnx::AttributeProto::INT)->set_i(v);
  return *this;
}
NodeRef& NodeRef::attr(const std::string& name, double v) {
  new_attr(n_, name, onnx::AttributeProto::FLOAT)->set_f(static_cast<float>(v));
  return *this;
}
NodeRef& NodeRef::attr(const std::string& name, const std::string& v) {
  new_attr(n_, name, onnx::AttributeProto::STRING)->set_s(v);
  return *this;
}
NodeRef& NodeRef::attr(const std::string& name, const std::vector<int64_t>& v) {
  auto* a = new_attr(n_, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return *this;
}
NodeRef& NodeRef::attr(const std::string& name, const std::vector<double>& v) {
  auto* a = new_attr(n_, name, onnx::AttributeProto::FLOATS);
  for (double x : v) a->add_floats(static_cast<float>(x));
  return *this;
}
NodeRef& NodeRef::attr(const std::string& name, const std::vector<std::string>& v) {
  auto* a = new_attr(n_, name, onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
  return *this;
}
NodeRef& NodeRef::attr(const std::string& name, const Tensor& v) {
  tensor_to_proto(v, *new_attr(n_, name, onnx::AttributeProto::TENSOR)->mutable_t());
  return *this;
}

NodeRef& NodeRef::attr(const std::string& name, const ModelBuilder& body) {
  *new_attr(n_, name, onnx::AttributeProto::GRAPH)->mutable_g() = body.model_->graph();
  return *this;
}

ModelBuilder::ModelBuilder(const std::string& graph_name, int64_t opset, int64_t ir_version)
    : model_(std::make_unique<onnx::ModelProto>()) {
  model_->set_ir_version(ir_version);
  model_->set_producer_name("kiln");
  auto* o = model_->add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  model_->mutable_graph()->set_name(graph_name);
}
ModelBuilder::~ModelBuilder() = default;
ModelBuilder::ModelBuilder(ModelBuilder&&) noexcept = default;

void ModelBuilder::input(const std::string& name, DType dtype, const std::vector<Dim>& dims) {
  auto* vi = model_->mutable_graph()->add_input();
  vi->set_name(name);
  set_type(vi, dtype, dims);
}
void ModelBuilder::input(const std::string& name, DType dtype, const Shape& shape) { input(name, dtype, to_dims(shape)); }

void ModelBuilder::composite_input(const std::string& name, const CompositeType& t) {
  auto* vi = model_->mutable_graph()->add_input();
  vi->set_name(name);
  onnx::TypeProto* type = vi->mutable_type();
  for (ValueKind k : t.kinds)
    type = k == ValueKind::Sequence ? type->mutable_sequence_type()->mutable_elem_type()
                                    : type->mutable_optional_type()->mutable_elem_type();
  set_tensor_type(type, t.dtype, t.dims, t.ranked);
}

void ModelBuilder::output(const std::string& name, DType dtype, const Shape& shape) { output(name, dtype, to_dims(shape)); }

void ModelBuilder::output(const std::string& name, DType dtype, const std::vector<Dim>& dims) {
  auto* vi = model_->mutable_graph()->add_output();
  vi->set_name(name);
  set_type(vi, dtype, dims);
}

void ModelBuilder::initializer(const std::string& name, const Tensor& value) {
  auto* t = model_->mutable_graph()->add_initializer();
  tensor_to_proto(value, *t);
  t->set_name(name);
}

NodeRef ModelBuilder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = model_->mutable_graph()->add_node();
  n->set_op_type(op_type);
  n->set_name(name.empty() ? outputs.at(0) : name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return NodeRef(n);
}

std::string ModelBuilder::serialize() const {
  std::string s;
  if (!model_->SerializeToString(&s)) throw Error("cannot serialize model '" + model_->graph().name() + "'");
  return s;
}

void ModelBuilder::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary);
  std::string s = serialize();
  if (!out.write(s.data(), static_cast<std::streamsize>(s.size()))) throw Error(path + ": cannot write file");
}

}  // namespace kiln
