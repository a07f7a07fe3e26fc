/// \file Small queries and edits on an ONNX GraphProto, for the rewrites `kiln quantize` makes on the
/// model it writes back out (kiln's own Graph is for compiling; the written model keeps the user's).
#pragma once
#include <optional>
#include <set>
#include <string>

#include "frontend/ir/tensor.h"

namespace onnx {
class GraphProto;
class NodeProto;
class TensorProto;
}  // namespace onnx

namespace kiln {

onnx::TensorProto* find_initializer(onnx::GraphProto& g, const std::string& name);
/// A float32 initializer's value; nothing when `name` is not one.
std::optional<Tensor> float_initializer(onnx::GraphProto& g, const std::string& name);
/// Adds (or replaces) an initializer.
void set_initializer(onnx::GraphProto& g, const std::string& name, const Tensor& value);
/// Removes initializers that no node reads and that are not graph outputs (and their graph inputs).
void drop_unread_initializers(onnx::GraphProto& g);
/// How many node inputs read `value`, plus one if it is a graph output.
int count_readers(const onnx::GraphProto& g, const std::string& value);
/// The index of the node that reads `value`, when it is the only reader (and not a graph output).
std::optional<int> sole_reader(const onnx::GraphProto& g, const std::string& value);
/// The rank ONNX shape inference recorded for `value` (value_info, inputs, outputs); -1 if none.
int value_rank(const onnx::GraphProto& g, const std::string& value);
void remove_node(onnx::GraphProto& g, int index);

/// Every name the graph uses, for making new ones that clash with none.
class NameSet {
 public:
  explicit NameSet(const onnx::GraphProto& g);
  /// `base`, or `base.1`, `base.2`, ... (the first free one), now taken.
  std::string fresh(const std::string& base);

 private:
  std::set<std::string> taken_;
};

}  // namespace kiln
