/// \file Writing ONNX models from kiln's own code: the model zoo, the demo model and test inputs.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace onnx {
class ModelProto;
class NodeProto;
}  // namespace onnx

namespace kiln {

/// Builds a ModelProto with libonnx's protobuf classes, so models kiln writes are read back by the
/// same importer and by any other ONNX consumer (ONNX Runtime in the benchmarks).
class ModelBuilder {
 public:
  /// Attributes of a node just added; chain calls: `b.node(...).attr("axis", 1)`.
  class NodeRef {
   public:
    explicit NodeRef(onnx::NodeProto* n) : n_(n) {}
    NodeRef& attr(const std::string& name, int64_t v);
    NodeRef& attr(const std::string& name, double v);
    NodeRef& attr(const std::string& name, const std::string& v);
    NodeRef& attr(const std::string& name, const std::vector<int64_t>& v);
    NodeRef& attr(const std::string& name, const std::vector<double>& v);
    NodeRef& attr(const std::string& name, const std::vector<std::string>& v);
    NodeRef& attr(const std::string& name, const Tensor& v);
    /// A subgraph attribute (an If branch): the graph `body` has built.
    NodeRef& attr(const std::string& name, const ModelBuilder& body);

   private:
    onnx::NodeProto* n_;
  };

  explicit ModelBuilder(const std::string& graph_name, int64_t opset = 17, int64_t ir_version = 8);
  ~ModelBuilder();
  ModelBuilder(ModelBuilder&&) noexcept;

  void input(const std::string& name, DType dtype, const std::vector<Dim>& dims);
  void input(const std::string& name, DType dtype, const Shape& shape);
  void output(const std::string& name, DType dtype, const Shape& shape);
  void output(const std::string& name, DType dtype, const std::vector<Dim>& dims);
  /// A graph input of type `t`: a sequence, optional or optional sequence of tensors, without a
  /// declared shape unless `t.ranked`.
  void composite_input(const std::string& name, const CompositeType& t);
  void initializer(const std::string& name, const Tensor& value);
  NodeRef node(const std::string& op_type, const std::vector<std::string>& inputs,
               const std::vector<std::string>& outputs, const std::string& name = "");

  std::string serialize() const;
  void save(const std::string& path) const;
  /// The proto itself, for tests that need to write what the builder would not (bad models).
  onnx::ModelProto& proto() { return *model_; }

 private:
  std::unique_ptr<onnx::ModelProto> model_;
};

}  // namespace kiln
