/// \file The table of operators kiln supports: per op, its shape inference, its reference kernel and
/// its FLOP count. Adding an op means adding one OpDef in the family file it belongs to
/// (elementwise.cc, shape_ops.cc, ...); nothing else in the compiler needs to change for import,
/// inspection, constant folding and the reference interpreter to handle it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "frontend/ir/error.h"
#include "frontend/ir/graph.h"

namespace kiln {

/// What shape inference sees of one node: input types, the values of constant inputs, attributes.
/// Shapes are static: an op whose output shape depends on a non-constant input fails with a message
/// that says which input must be computable at compile time.
class InferContext {
 public:
  InferContext(const Node& node, const Graph& graph) : node_(node), graph_(graph) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset; }

  size_t num_inputs() const { return node_.inputs.size(); }
  bool has_input(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  DType dtype(size_t i) const { return input(i).dtype; }
  const Shape& shape(size_t i) const { return input(i).shape; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(shape(i).size()); }
  /// The value of input i if it is known at compile time, else nullptr.
  const Tensor* constant(size_t i) const;
  /// The value of input i; fails naming `what` when it is not known at compile time.
  const Tensor& require_constant(size_t i, const char* what) const;

  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  void set_output(size_t i, DType dtype, Shape shape);
  /// For ops whose result is known from types alone (Shape, Size): the output becomes a constant.
  void set_output_constant(size_t i, Tensor value);

  /// Throws Error("node 'n' (Op): msg").
  [[noreturn]] void fail(const std::string& msg) const;
  [[noreturn]] void unsupported(const std::string& msg) const;
  /// Fails unless input i is present.
  void require_input(size_t i, const char* what) const;

  struct Out {
    DType dtype = DType::Undefined;
    Shape shape;
    bool set = false;
    std::shared_ptr<const Tensor> constant;
  };
  const std::vector<Out>& outputs() const { return outs_; }

 private:
  const Value& input(size_t i) const;
  const Node& node_;
  const Graph& graph_;
  std::vector<Out> outs_;
};

/// What a reference kernel sees: input tensors (absent optional inputs are nullptr) and attributes.
class EvalContext {
 public:
  EvalContext(const Node& node, std::vector<const Tensor*> inputs) : node_(node), inputs_(std::move(inputs)) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset; }
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  void set_output(size_t i, Tensor t);
  [[noreturn]] void fail(const std::string& msg) const;

  std::vector<Tensor>& outputs() { return outs_; }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outs_;
};

/// Input and output shapes of a node, for cost formulas.
struct NodeShapes {
  const Node& node;
  std::vector<Shape> in;   // empty Shape for an absent input
  std::vector<Shape> out;
};

/// One supported operator. `flops` counts 2 per multiply-add and 1 per other arithmetic op; see
/// docs/ops.md for the per-op formulas. Data movement ops leave it unset (0 FLOPs).
struct OpDef {
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  std::function<void(InferContext&)> infer;
  std::function<void(EvalContext&)> eval;
  std::function<double(const NodeShapes&)> flops;
  /// Whether the op reads or writes the narrow types (narrow_types.h). Only conversions and ops that
  /// move values without computing take them; shape inference refuses them elsewhere.
  bool takes_narrow_types = false;
};

/// Looks up an op; nullptr when kiln does not support it. "ai.onnx" and "" are the same domain.
const OpDef* find_op(const std::string& domain, const std::string& op_type);
/// The FLOPs of node `n` of shape-inferred `g` by its op's count; 0 for ops without one.
double node_flops(const Node& n, const Graph& g);
/// Every supported op, sorted by domain and name.
std::vector<const OpDef*> all_ops();

/// The registry the family files fill. Each family exposes one `register_<family>_ops` function,
/// called from op_registry.cc.
class OpRegistry {
 public:
  void add(OpDef def);
  const OpDef* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpDef*> all() const;

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
};

void register_elementwise_ops(OpRegistry& r);   // unary math, activations, binary arithmetic, logic, Cast
void register_shape_ops(OpRegistry& r);         // reshape, transpose, slice, gather, concat, pad, ...
void register_reduction_ops(OpRegistry& r);     // Reduce*, ArgMax/Min, Softmax family, normalisations
void register_nn_ops(OpRegistry& r);            // Conv, ConvTranspose, pooling, Resize
void register_linalg_ops(OpRegistry& r);        // MatMul, Gemm, Einsum, Attention, quantized ops
void register_signal_ops(OpRegistry& r);        // windows, DFT/STFT, mel filters
void register_misc_ops(OpRegistry& r);          // ops of no other family (misc_family.h): sampling, NMS, Det, ml/training domains

}  // namespace kiln
