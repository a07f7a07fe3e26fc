/// \file How graph nodes become tensor-expression stages. Each op family has a file in
/// scheduler/te/ops/ that registers one OpLowering per op; together with frontend/ops (shape inference
/// and the reference kernel) that is everything an op needs.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "frontend/ir/error.h"
#include "frontend/ir/graph.h"
#include "scheduler/te/compute.h"

namespace kiln::te {

/// What an op's lowering sees: the node, its input tensors (placeholders or earlier stages), the
/// compile-time values of constant inputs, and the output types shape inference already computed.
/// Values of the narrow types are their uint8 codes (narrow_codes.h): dtype() and out_dtype() say
/// uint8 for them, graph_dtype() and out_graph_dtype() which type the codes are of.
class LowerContext {
 public:
  LowerContext(const Node& node, std::vector<TensorRef> inputs, std::vector<const Tensor*> constants,
               std::vector<DType> in_dtypes, std::vector<DType> out_dtypes, std::vector<Shape> out_shapes)
      : node_(node), inputs_(std::move(inputs)), constants_(std::move(constants)), in_dtypes_(std::move(in_dtypes)),
        out_dtypes_(std::move(out_dtypes)), out_shapes_(std::move(out_shapes)), outputs_(node.outputs.size()) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset; }
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const TensorRef& input(size_t i) const;
  DType dtype(size_t i) const { return input(i)->dtype; }
  DType graph_dtype(size_t i) const { return in_dtypes_.at(i); }
  const Shape& shape(size_t i) const { return input(i)->shape; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(shape(i).size()); }
  /// The value of input i when it is known at compile time, else nullptr.
  const Tensor* constant(size_t i) const { return i < constants_.size() ? constants_[i] : nullptr; }
  const Tensor& require_constant(size_t i, const char* what) const;

  size_t num_outputs() const { return out_shapes_.size(); }
  bool has_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  DType out_dtype(size_t i) const;
  DType out_graph_dtype(size_t i) const { return out_dtypes_.at(i); }
  const Shape& out_shape(size_t i) const { return out_shapes_.at(i); }
  /// Sets output i; its dtype and shape must be what shape inference said.
  void set_output(size_t i, TensorRef t);
  /// A stage name derived from the node's name: "<node>" or "<node>.<suffix>".
  std::string name(const std::string& suffix = "") const;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(node_.label() + ": " + msg); }
  [[noreturn]] void unsupported(const std::string& msg) const { throw Unsupported(node_.label() + ": " + msg); }

  const std::vector<TensorRef>& outputs() const { return outputs_; }

 private:
  const Node& node_;
  std::vector<TensorRef> inputs_;
  std::vector<const Tensor*> constants_;
  std::vector<DType> in_dtypes_;
  std::vector<DType> out_dtypes_;
  std::vector<Shape> out_shapes_;
  std::vector<TensorRef> outputs_;
};

struct OpLowering {
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  std::function<void(LowerContext&)> lower;
};

class LoweringRegistry {
 public:
  void add(OpLowering l);
  const OpLowering* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpLowering*> all() const;

 private:
  std::vector<std::unique_ptr<OpLowering>> defs_;
};

const OpLowering* find_lowering(const std::string& domain, const std::string& op_type);
std::vector<const OpLowering*> all_lowerings();

// One per family, in scheduler/te/ops/, mirroring frontend/ops.
void register_elementwise_lowerings(LoweringRegistry& r);
void register_shape_lowerings(LoweringRegistry& r);
void register_reduction_lowerings(LoweringRegistry& r);
void register_nn_lowerings(LoweringRegistry& r);
void register_linalg_lowerings(LoweringRegistry& r);
void register_misc_lowerings(LoweringRegistry& r);

}  // namespace kiln::te
