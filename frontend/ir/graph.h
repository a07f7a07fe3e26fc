/// \file kiln's graph IR: what the ONNX importer produces and every frontend pass reads and rewrites.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ir/attribute.h"
#include "frontend/ir/tensor.h"

namespace kiln {

/// A dimension as a model declares it: a number, a symbolic name ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string param;   // symbolic name when not known (may be empty)
  bool known() const { return value >= 0; }
};
std::string dims_str(const std::vector<Dim>& dims);

/// What a value holds. kiln compiles tensors; a sequence or an optional lives only until shape
/// inference resolves it to the tensors it holds (frontend/passes/resolve_sequences.h).
enum class ValueKind { Tensor, Sequence, Optional };
/// "tensor", "sequence", "optional".
const char* value_kind_name(ValueKind k);

/// An edge of the graph: a tensor, or (until inference ends) a sequence or an optional. Until shape
/// inference has run, `typed` is false for everything but graph inputs and constants. `constant` is
/// set for initializers and for values that constant folding computed; such values need no kernel at
/// run time.
struct Value {
  std::string name;
  DType dtype = DType::Undefined;  // a sequence's element dtype
  Shape shape;
  bool typed = false;
  std::shared_ptr<const Tensor> constant;
  ValueKind kind = ValueKind::Tensor;
  /// A resolved sequence's tensors in order; an optional's one value (a tensor or a sequence), or
  /// none when it is empty. Values are immutable, so a sequence may share them with another.
  std::vector<std::string> elements;
};

/// A tensor whose extent along `axis` is decided at run time (frontend/passes/bound_run_time_shapes.h):
/// kiln gives it a bound there, the first `count` (an int64 scalar value) entries along the axis are
/// the tensor, the rest are unspecified. `origin` labels the node that made it so, for messages.
struct RunTimeExtent {
  int64_t axis = 0;
  std::string count;
  std::string origin;
};

/// How the model declares a graph input that is not a tensor: a sequence, an optional, or an
/// optional sequence (`kinds`, outermost first) of tensors of `dtype`; `dims` when `ranked` (a
/// sequence's elements often declare no shape, and may each have their own).
struct CompositeType {
  std::vector<ValueKind> kinds;
  DType dtype = DType::Undefined;
  bool ranked = false;
  std::vector<Dim> dims;
};
/// "sequence(tensor(float))", "optional(sequence(tensor(float)))".
std::string composite_type_str(const CompositeType& t);

/// A run-time condition a node runs under: it runs when the bool scalar `cond` equals `when`. The
/// branches of an If whose condition is known only at run time are inlined with one (inline_if.h);
/// nested Ifs give their nodes several, outermost first.
struct Guard {
  std::string cond;
  bool when = true;
  bool operator==(const Guard& o) const { return cond == o.cond && when == o.when; }
};
/// "if c" / "if not c", joined by " and "; "" when there are none.
std::string guards_str(const std::vector<Guard>& guards);

/// One operator application. Inputs and outputs name Values; an empty name is an omitted optional
/// input or output. `opset` is the version of the node's domain the model imports, which selects the
/// op's semantics (e.g. Softmax's axis before and after opset 13).
struct Node {
  std::string name;  // never empty: the importer names anonymous nodes "<op_type>_<index>"
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int64_t opset = 0;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  Attributes attrs;
  /// Conditions the node runs under; empty: always. A rewrite that replaces a node gives the nodes it
  /// adds the same guards (a node without them runs always, which costs time but is never wrong: only
  /// an If's merge reads a branch's values outside the branch).
  std::vector<Guard> guards;

  /// "node 'conv1' (Conv)": how errors name a node.
  std::string label() const;

  bool has_attr(const std::string& name) const { return attrs.count(name) != 0; }
  /// Typed attribute access: a missing attribute gives the default; a present one of the wrong kind
  /// throws Error naming the node and the attribute.
  int64_t attr_int(const std::string& name, int64_t dflt) const;
  double attr_float(const std::string& name, double dflt) const;
  std::string attr_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& name, const std::vector<int64_t>& dflt = {}) const;
  std::vector<double> attr_floats(const std::string& name, const std::vector<double>& dflt = {}) const;
  std::vector<std::string> attr_strings(const std::string& name) const;
  const Tensor* attr_tensor(const std::string& name) const;  // nullptr when absent
  /// Throws Error when the attribute is missing.
  int64_t required_int(const std::string& name) const;
  std::vector<int64_t> required_ints(const std::string& name) const;
};

/// A model graph. Nodes are kept in topological order once the importer has checked the graph.
struct Graph {
  std::string name;
  std::string source;  // file the graph came from, for messages
  std::vector<Node> nodes;
  std::vector<std::string> inputs;   // graph inputs that are not initializers, in declaration order
  std::vector<std::string> outputs;
  std::map<std::string, std::vector<Dim>> declared_input_dims;  // as the model declares them
  /// Graph inputs the model declares as sequences or optionals (they have no declared_input_dims).
  std::map<std::string, CompositeType> composite_inputs;
  /// Graph inputs and outputs the model declares as sequences or optionals, once bound (inputs) or
  /// inferred (outputs): the tensors they hold, depth first, which `inputs` and `outputs` list in
  /// their place (none for an empty optional). `model_inputs` and `model_outputs` are the lists as the
  /// model declares them; empty until some input or output is replaced.
  std::map<std::string, std::vector<std::string>> io_parts;
  std::vector<std::string> model_inputs, model_outputs;
  /// Values whose extent along one axis is decided at run time, by name. A graph output among them
  /// has its count as another graph output (`count_outputs`, by output name).
  std::map<std::string, RunTimeExtent> run_time_extents;
  std::map<std::string, RunTimeExtent> count_outputs;
  /// Whether such ops get a bound; false where the code will have no runtime kernel for them (GPU
  /// programs), so that the values they depend on must be known at compile time (NotConstant).
  bool run_time_shapes = true;
  std::map<std::string, Value> values;
  std::map<std::string, int64_t> opsets;  // domain -> version
  int64_t ir_version = 0;
  /// What compiled code does differently from the model for some inputs, by the user's leave (a
  /// Loop bounded by --max-trip-count runs at most that many iterations): the package header says so.
  std::vector<std::string> limits;

  Value& value(const std::string& name);
  const Value& value(const std::string& name) const;
  bool has_value(const std::string& name) const { return values.count(name) != 0; }
  /// A new typed value named `base`, or `base.1`, `base.2`, ... when that is taken (rewrites add
  /// values beside the model's); returns its name.
  std::string add_value(const std::string& base, DType dtype, Shape shape, std::shared_ptr<const Tensor> constant = nullptr);
  /// add_value for a compile-time constant.
  std::string add_constant(const std::string& base, Tensor t);
  /// The constant behind input `i` of `n`; nullptr when the input is omitted or not a constant.
  const Tensor* constant_input(const Node& n, size_t i) const;
};

/// If, Loop and Scan of the default domain: nodes that hold subgraphs and have no OpDef; shape
/// inference replaces them by their subgraphs' nodes (inline_if.h, unroll_loops.h).
bool is_control_flow(const Node& n);

/// The default domain's ops on sequences and optionals (SequenceConstruct, SplitToSequence, Optional,
/// ...): they have no OpDef; shape inference resolves them (resolve_sequences.h).
bool is_sequence_op(const Node& n);

/// The names a subgraph reads from the graphs around it: inputs of its nodes (and of their own
/// subgraphs) that it neither declares as inputs nor defines, and outputs it passes through from
/// outside, sorted. A node that holds subgraphs depends on these as on its inputs.
std::vector<std::string> outer_references(const Graph& subgraph);

/// The outer references of every subgraph attribute of `n`.
std::vector<std::string> implicit_inputs(const Node& n);

}  // namespace kiln
