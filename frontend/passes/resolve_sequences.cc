#include "frontend/passes/resolve_sequences.h"

#include <algorithm>

#include "frontend/ir/error.h"
#include "frontend/ops/axes_and_broadcast.h"
#include "frontend/passes/node_emitter.h"
#include "frontend/passes/splice_subgraph.h"

namespace kiln {
namespace {

const Value& required_input(const Graph& g, const Node& n, size_t i, const char* what) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) throw Error(n.label() + ": input '" + what + "' is missing");
  return g.value(n.inputs[i]);
}

const Value& input_of_kind(const Graph& g, const Node& n, size_t i, const char* what, ValueKind kind) {
  const Value& v = required_input(g, n, i, what);
  if (v.kind != kind)
    throw Error(n.label() + ": input '" + what + "' ('" + v.name + "') is a " + value_kind_name(v.kind) + ", not a " +
                value_kind_name(kind));
  if (!v.typed) throw Error(n.label() + ": input '" + v.name + "' has no inferred type");
  return v;
}

// A sequence's element dtype: declared (SequenceEmpty), or its first tensor's.
DType element_dtype(const Graph& g, const Value& seq) {
  return seq.elements.empty() ? seq.dtype : g.value(seq.elements.front()).dtype;
}

// Input `i`, a position into a sequence of `size` tensors: a constant integer in [-size, size - 1]
// (or up to size where it may append), made non-negative; `dflt` when the input is omitted.
int64_t position(const Graph& g, const Node& n, size_t i, int64_t size, bool may_append, int64_t dflt) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return dflt;
  const Value& p = g.value(n.inputs[i]);
  if (!p.constant)
    throw NotConstant(n.label() + ": position '" + p.name +
                          "' must be known at compile time, as a sequence's structure is (--freeze the inputs it comes from)",
                      p.name);
  if (p.constant->size() != 1 || is_float(p.constant->dtype()))
    throw Error(n.label() + ": position '" + p.name + "' must be one integer");
  const int64_t pos = p.constant->get_int(0), last = may_append ? size : size - 1;
  if (pos < -size || pos > last)
    throw Error(n.label() + ": position " + std::to_string(pos) + " is out of range for a sequence of " + std::to_string(size) +
                " tensors");
  return pos < 0 ? pos + size : pos;
}

void set_composite(Graph& g, const std::string& out, ValueKind kind, DType dtype, std::vector<std::string> elements) {
  if (out.empty()) return;
  Value& v = g.value(out);
  v.kind = kind;
  v.dtype = dtype;
  v.shape = {};
  v.constant = nullptr;
  v.elements = std::move(elements);
  v.typed = true;
}

void set_constant(Graph& g, const std::string& out, Tensor t) {
  if (out.empty()) return;
  Value& v = g.value(out);
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.constant = std::make_shared<const Tensor>(std::move(t));
  v.typed = true;
}

// `out` becomes what `from` is: a copy of a tensor, the same tensors of a sequence or optional.
void pass_on(Graph& g, NodeEmitter& emit, const std::string& from, const std::string& out) {
  const Value& v = g.value(from);
  if (v.kind == ValueKind::Tensor) {
    if (!out.empty()) emit.op("Identity", {from}, {}, out);
  } else {
    set_composite(g, out, v.kind, v.dtype, v.elements);
  }
}

// SplitToSequence: one Slice per piece, squeezed when `split` is absent and keepdims is 0.
void split_to_sequence(Graph& g, const Node& n, NodeEmitter& emit) {
  const Value& x = input_of_kind(g, n, 0, "input", ValueKind::Tensor);
  const int64_t axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x.shape.size()));
  const int64_t extent = x.shape[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const Value& s = g.value(n.inputs[1]);
    if (!s.constant) throw NotConstant(n.label() + ": split '" + s.name + "' must be known at compile time", s.name);
    if (s.shape.empty()) {
      const int64_t chunk = s.constant->get_int(0);
      if (chunk <= 0) throw Error(n.label() + ": split " + std::to_string(chunk) + " must be positive");
      for (int64_t at = 0; at < extent; at += chunk) sizes.push_back(std::min(chunk, extent - at));
    } else {
      int64_t total = 0;
      for (int64_t i = 0; i < s.constant->size(); ++i) {
        sizes.push_back(s.constant->get_int(i));
        if (sizes.back() < 0) throw Error(n.label() + ": split has a negative size");
        total += sizes.back();
      }
      if (total != extent)
        throw Error(n.label() + ": split sizes add up to " + std::to_string(total) + ", the axis has " + std::to_string(extent));
    }
  } else {
    sizes.assign(static_cast<size_t>(extent), 1);
    squeeze = n.attr_int("keepdims", 1) == 0;
  }
  std::vector<std::string> pieces;
  int64_t at = 0;
  for (int64_t size : sizes) {
    std::string piece = emit.op("Slice", {x.name, emit.ints({at}), emit.ints({at + size}), emit.ints({axis})});
    if (squeeze) piece = emit.op("Squeeze", {piece, emit.ints({axis})});
    pieces.push_back(piece);
    at += size;
  }
  set_composite(g, n.outputs[0], ValueKind::Sequence, x.dtype, pieces);
}

// ConcatFromSequence: Concat, after an Unsqueeze of every tensor when new_axis is set.
void concat_from_sequence(Graph& g, const Node& n, NodeEmitter& emit) {
  const Value& s = input_of_kind(g, n, 0, "input_sequence", ValueKind::Sequence);
  if (s.elements.empty()) throw Error(n.label() + ": the sequence '" + s.name + "' is empty");
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  const int64_t rank = static_cast<int64_t>(g.value(s.elements.front()).shape.size()) + (new_axis ? 1 : 0);
  const int64_t axis = normalize_axis(n, n.required_int("axis"), rank);
  std::vector<std::string> parts = s.elements;
  if (new_axis)
    for (std::string& p : parts) p = emit.op("Unsqueeze", {p, emit.ints({axis})});
  emit.op("Concat", parts, {{"axis", AttrValue(axis)}}, n.outputs[0]);
}

// SequenceMap: the body once per element, reading element i of each sequence input (and the tensor
// inputs whole); output k is the sequence of the body's output k.
std::vector<Node> sequence_map(Graph& g, const Node& n) {
  const Graph& body = subgraph_attr(n, "body");
  const size_t length = input_of_kind(g, n, 0, "input_sequence", ValueKind::Sequence).elements.size();
  for (size_t j = 1; j < n.inputs.size(); ++j) {
    const Value& v = required_input(g, n, j, "additional_inputs");
    if (v.kind == ValueKind::Sequence && v.elements.size() != length)
      throw Error(n.label() + ": sequence '" + v.name + "' has " + std::to_string(v.elements.size()) + " tensors, the first " +
                  std::to_string(length));
    if (v.kind == ValueKind::Optional) throw Error(n.label() + ": input '" + v.name + "' is an optional");
  }
  if (body.outputs.size() != n.outputs.size())
    throw Error(n.label() + ": the body has " + std::to_string(body.outputs.size()) + " outputs, the node " +
                std::to_string(n.outputs.size()));
  check_expansion(g, length * body.nodes.size(), n.label());
  std::vector<Node> nodes;
  std::vector<std::vector<std::string>> outputs(n.outputs.size());
  for (size_t i = 0; i < length; ++i) {
    std::vector<std::string> ins;
    for (const std::string& in : n.inputs) {
      const Value& v = g.value(in);
      ins.push_back(v.kind == ValueKind::Sequence ? v.elements[i] : in);
    }
    SplicedSubgraph step = splice_subgraph(g, body, n.name + "/" + std::to_string(i) + "/", n.guards, ins, n.label());
    nodes.insert(nodes.end(), step.nodes.begin(), step.nodes.end());
    for (size_t k = 0; k < outputs.size(); ++k) outputs[k].push_back(step.outputs[k]);
  }
  for (size_t k = 0; k < outputs.size(); ++k)
    set_composite(g, n.outputs[k], ValueKind::Sequence, DType::Undefined, std::move(outputs[k]));
  return nodes;
}

// kiln.IfMerge of two sequences or optionals (a run-time If's branches): the same structure merges
// tensor by tensor; a different one cannot be compiled unless the condition is frozen.
void merge_composites(Graph& g, const Node& n, NodeEmitter& emit) {
  const Value& then_v = required_input(g, n, 1, "then");
  const Value& else_v = required_input(g, n, 2, "else");
  const auto structure = [&](const Value& v) {
    return std::string(value_kind_name(v.kind)) + " of " + std::to_string(v.elements.size()) + " values";
  };
  if (then_v.kind != else_v.kind || then_v.elements.size() != else_v.elements.size())
    throw NotConstant(n.label() + ": one branch gives a " + structure(then_v) + ", the other a " + structure(else_v) +
                          ", which only a condition known at compile time can choose between (--freeze its inputs)",
                      n.inputs[0]);
  std::vector<std::string> merged;
  for (size_t i = 0; i < then_v.elements.size(); ++i)
    merged.push_back(emit.op("IfMerge", {n.inputs[0], then_v.elements[i], else_v.elements[i]}, n.attrs, "", "kiln"));
  set_composite(g, n.outputs[0], then_v.kind, then_v.dtype, std::move(merged));
}

std::vector<Node> resolve(Graph& g, const Node& n) {
  NodeEmitter emit(g, n);
  const std::string& op = n.op_type;
  const std::string out = n.outputs.empty() ? "" : n.outputs[0];
  if (op == "SequenceMap" && n.domain.empty()) return sequence_map(g, n);
  if (op == "SequenceEmpty") {
    set_composite(g, out, ValueKind::Sequence, dtype_from_int(static_cast<int32_t>(n.attr_int("dtype", 1))), {});
  } else if (op == "SequenceConstruct") {
    if (n.inputs.empty()) throw Error(n.label() + ": needs at least one tensor");
    const DType dtype = input_of_kind(g, n, 0, "inputs", ValueKind::Tensor).dtype;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (input_of_kind(g, n, i, "inputs", ValueKind::Tensor).dtype != dtype)
        throw Error(n.label() + ": its tensors differ in dtype");
    set_composite(g, out, ValueKind::Sequence, dtype, n.inputs);
  } else if (op == "SequenceInsert") {
    const Value& s = input_of_kind(g, n, 0, "input_sequence", ValueKind::Sequence);
    const Value& t = input_of_kind(g, n, 1, "tensor", ValueKind::Tensor);
    const DType dtype = element_dtype(g, s);
    if (dtype != DType::Undefined && dtype != t.dtype)
      throw Error(n.label() + ": inserts a " + dtype_name(t.dtype) + " tensor into a sequence of " + dtype_name(dtype));
    std::vector<std::string> elements = s.elements;
    const auto size = static_cast<int64_t>(elements.size());
    elements.insert(elements.begin() + position(g, n, 2, size, true, size), t.name);
    set_composite(g, out, ValueKind::Sequence, t.dtype, std::move(elements));
  } else if (op == "SequenceAt" || op == "SequenceErase") {
    const Value& s = input_of_kind(g, n, 0, "input_sequence", ValueKind::Sequence);
    const auto size = static_cast<int64_t>(s.elements.size());
    if (size == 0) throw Error(n.label() + ": the sequence '" + s.name + "' is empty");
    if (op == "SequenceAt") {
      required_input(g, n, 1, "position");
      emit.op("Identity", {s.elements[position(g, n, 1, size, false, 0)]}, {}, out);
    } else {
      std::vector<std::string> elements = s.elements;
      elements.erase(elements.begin() + position(g, n, 1, size, false, size - 1));
      set_composite(g, out, ValueKind::Sequence, s.dtype, std::move(elements));
    }
  } else if (op == "SequenceLength") {
    const Value& s = input_of_kind(g, n, 0, "input_sequence", ValueKind::Sequence);
    set_constant(g, out, Tensor::scalar_int(DType::Int64, static_cast<int64_t>(s.elements.size())));
  } else if (op == "SplitToSequence") {
    split_to_sequence(g, n, emit);
  } else if (op == "ConcatFromSequence") {
    concat_from_sequence(g, n, emit);
  } else if (op == "Optional") {
    const bool present = !n.inputs.empty() && !n.inputs[0].empty();
    const DType dtype = present ? g.value(n.inputs[0]).dtype : DType::Undefined;
    set_composite(g, out, ValueKind::Optional, dtype, present ? std::vector{n.inputs[0]} : std::vector<std::string>{});
  } else if (op == "OptionalHasElement") {
    bool has = false;
    if (!n.inputs.empty() && !n.inputs[0].empty()) {
      const Value& v = g.value(n.inputs[0]);
      has = v.kind != ValueKind::Optional || !v.elements.empty();
    }
    set_constant(g, out, Tensor::scalar_int(DType::Bool, has ? 1 : 0));
  } else if (op == "OptionalGetElement") {
    const Value& v = required_input(g, n, 0, "input");
    if (v.kind == ValueKind::Optional && v.elements.empty()) throw Error(n.label() + ": the optional '" + v.name + "' is empty");
    pass_on(g, emit, v.kind == ValueKind::Optional ? v.elements.front() : v.name, out);
  } else if (op == "Identity" && n.domain.empty()) {
    pass_on(g, emit, required_input(g, n, 0, "input").name, out);
  } else if (op == "IfMerge" && n.domain == "kiln") {
    merge_composites(g, n, emit);
  } else {
    for (const std::string& in : n.inputs)
      if (!in.empty() && g.value(in).kind != ValueKind::Tensor)
        throw Error(n.label() + ": input '" + in + "' is a " + value_kind_name(g.value(in).kind) + "; the op takes tensors");
    throw Error(n.label() + ": is not a sequence op");
  }
  return emit.nodes();
}

// Appends to `parts` an Identity per tensor that `v` holds, named after `base`, depth first.
void flatten(Graph& g, const Value& v, const std::string& base, std::vector<std::string>& parts) {
  for (size_t i = 0; i < v.elements.size(); ++i) {
    const Value& e = g.value(v.elements[i]);
    const std::string name = base + (v.kind == ValueKind::Sequence ? "." + std::to_string(i) : ".value");
    if (e.kind != ValueKind::Tensor) {
      flatten(g, e, name, parts);
      continue;
    }
    parts.push_back(append_copy(g, e.name, name));
  }
}

}  // namespace

bool reads_or_makes_sequences(const Node& n, const Graph& g) {
  if (is_sequence_op(n)) return true;
  return std::any_of(n.inputs.begin(), n.inputs.end(),
                     [&](const std::string& in) { return !in.empty() && g.value(in).kind != ValueKind::Tensor; });
}

void resolve_sequence_node(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  replace_node(g, index, resolve(g, node));
}

void flatten_composite_outputs(Graph& g) {
  const bool any = std::any_of(g.outputs.begin(), g.outputs.end(),
                               [&](const std::string& o) { return g.value(o).kind != ValueKind::Tensor; });
  if (!any) return;
  std::vector<std::string> flat;
  for (const std::string& o : g.outputs) {
    const Value& v = g.value(o);
    if (v.kind == ValueKind::Tensor) {
      flat.push_back(o);
      continue;
    }
    std::vector<std::string>& parts = g.io_parts[o];
    flatten(g, v, o, parts);
    flat.insert(flat.end(), parts.begin(), parts.end());
  }
  g.model_outputs = g.outputs;
  g.outputs = flat;
}

}  // namespace kiln
