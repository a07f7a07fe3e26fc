#include "frontend/passes/bind_input_shapes.h"

#include <algorithm>
#include <charconv>

#include "frontend/ir/error.h"
#include "frontend/passes/unroll_loops.h"

namespace kiln {
namespace {

int64_t parse_extent(const std::string& s, const std::string& spec) {
  int64_t v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    throw Error("bad extent '" + s + "' in '" + spec + "' (expected a non-negative integer)");
  return v;
}

// The shape of tensor input `name` from what `b` binds: its whole shape, or its declared dims with
// named ones bound. Fails naming the input and the axis.
Shape bound_shape(const Graph& g, const std::string& name, const std::vector<Dim>& declared, const ShapeBindings& b) {
  const std::string where = g.source + ": graph input '" + name + "'";
  auto it = b.input_shapes.find(name);
  Shape shape;
  if (it != b.input_shapes.end()) {
    shape = it->second;
    if (shape.size() != declared.size())
      throw Error(where + ": bound shape " + shape_str(shape) + " has rank " + std::to_string(shape.size()) +
                  " but the model declares " + dims_str(declared));
    for (size_t i = 0; i < shape.size(); ++i)
      if (declared[i].known() && declared[i].value != shape[i])
        throw Error(where + ": bound shape " + shape_str(shape) + " disagrees with the declared " + dims_str(declared) +
                    " at axis " + std::to_string(i));
    return shape;
  }
  for (size_t i = 0; i < declared.size(); ++i) {
    const Dim& d = declared[i];
    if (d.known()) {
      shape.push_back(d.value);
      continue;
    }
    auto bd = d.param.empty() ? b.dims.end() : b.dims.find(d.param);
    if (bd == b.dims.end())
      throw Error(where + ": dimension " + (d.param.empty() ? "?" : "'" + d.param + "'") + " at axis " + std::to_string(i) +
                  " is not bound (use --input-shape " + name + "=... or --dim " + (d.param.empty() ? "NAME" : d.param) +
                  "=N)");
    shape.push_back(bd->second);
  }
  return shape;
}

// The layout a sequence or optional input is bound to: the user's, or for an optional tensor the
// present value's shape from --input-shape or the declared dims (or none, when `absent`).
IoLayout composite_layout(const Graph& g, const std::string& name, const CompositeType& type, const ShapeBindings& b) {
  IoLayout layout;
  layout.kind = type.kinds.front();
  auto given = b.composite.find(name);
  if (given != b.composite.end()) {
    if (given->second.kind == ValueKind::Optional || layout.kind != ValueKind::Optional) return given->second;
    layout.elements.push_back(given->second);  // an optional sequence bound by --sequence: present
    return layout;
  }
  if (b.absent.count(name) && layout.kind == ValueKind::Optional) return layout;
  if (type.kinds == std::vector{ValueKind::Optional} && type.ranked) {
    IoLayout value;
    value.shape = bound_shape(g, name, type.dims, b);
    layout.elements.push_back(value);
    return layout;
  }
  const bool optional = layout.kind == ValueKind::Optional;
  throw Error(g.source + ": graph input '" + name + "' is a " + composite_type_str(type) + ": bind the tensors it holds (" +
              (type.kinds.back() == ValueKind::Sequence ? "--sequence " + name + "=SHAPE;SHAPE;..." : "--input-shape " + name + "=SHAPE") +
              (optional ? " or --absent " + name : "") + ")");
}

// Adds the values that composite input `name` holds as `layout` says, checked against the declared
// `type` from nesting level `depth` on; returns the value's name and appends its tensors to `parts`.
std::string bind_composite(Graph& g, const std::string& name, const std::string& value_name, const CompositeType& type,
                           size_t depth, const IoLayout& layout, std::vector<std::string>& parts) {
  const std::string where = g.source + ": graph input '" + name + "'";
  const ValueKind want = depth < type.kinds.size() ? type.kinds[depth] : ValueKind::Tensor;
  if (layout.kind != want)
    throw Error(where + " is a " + composite_type_str(type) + ", bound with a " + value_kind_name(layout.kind) + " where it has a " +
                value_kind_name(want));
  if (want == ValueKind::Tensor) {
    if (type.ranked && layout.shape.size() != type.dims.size())
      throw Error(where + ": a tensor of shape " + shape_str(layout.shape) + " where the model declares " + dims_str(type.dims));
    for (size_t i = 0; type.ranked && i < layout.shape.size(); ++i)
      if (type.dims[i].known() && type.dims[i].value != layout.shape[i])
        throw Error(where + ": a tensor of shape " + shape_str(layout.shape) + " disagrees with the declared " +
                    dims_str(type.dims) + " at axis " + std::to_string(i));
    parts.push_back(g.add_value(value_name, type.dtype, layout.shape));
    return parts.back();
  }
  if (want == ValueKind::Optional && layout.elements.size() > 1)
    throw Error(where + ": an optional holds one value, bound with " + std::to_string(layout.elements.size()));
  std::vector<std::string> elements;
  for (size_t i = 0; i < layout.elements.size(); ++i)
    elements.push_back(bind_composite(g, name, value_name + (want == ValueKind::Sequence ? "." + std::to_string(i) : ".value"),
                                      type, depth + 1, layout.elements[i], parts));
  const std::string v = depth == 0 ? value_name : g.add_value(value_name, type.dtype, {});
  Value& val = g.value(v);
  val.kind = want;
  val.dtype = type.dtype;
  val.elements = std::move(elements);
  val.typed = true;
  return v;
}

// Replaces each sequence or optional in g.inputs by the tensors it holds (Graph::io_parts).
void bind_composite_inputs(Graph& g, const ShapeBindings& b) {
  for (const auto& [name, layout] : b.composite)
    if (!g.composite_inputs.count(name))
      throw Error(g.source + ": '" + name + "' is bound as a sequence (--sequence) but is no sequence or optional graph input");
  for (const std::string& name : b.absent)
    if (!g.composite_inputs.count(name) || g.composite_inputs.at(name).kinds.front() != ValueKind::Optional)
      throw Error(g.source + ": --absent " + name + ": the graph has no optional input of that name");
  if (g.composite_inputs.empty()) return;
  std::vector<std::string> flat;
  for (const std::string& name : g.inputs) {
    auto c = g.composite_inputs.find(name);
    if (c == g.composite_inputs.end()) {
      flat.push_back(name);
      continue;
    }
    std::vector<std::string>& parts = g.io_parts[name];
    bind_composite(g, name, name, c->second, 0, composite_layout(g, name, c->second, b), parts);
    flat.insert(flat.end(), parts.begin(), parts.end());
  }
  g.model_inputs = g.inputs;
  g.inputs = flat;
}

}  // namespace

std::pair<std::string, IoLayout> parse_sequence_shapes(const std::string& spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) throw Error("bad --sequence '" + spec + "' (expected name=2x3;4x3, or name= when empty)");
  IoLayout layout;
  layout.kind = ValueKind::Sequence;
  const std::string list = spec.substr(eq + 1);
  for (size_t start = 0; !list.empty() && start <= list.size();) {
    size_t semi = list.find(';', start);
    if (semi == std::string::npos) semi = list.size();
    IoLayout element;
    element.shape = parse_input_shape("e=" + list.substr(start, semi - start)).second;
    layout.elements.push_back(element);
    start = semi + 1;
  }
  return {spec.substr(0, eq), layout};
}

std::pair<std::string, Shape> parse_input_shape(const std::string& spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) throw Error("bad --input-shape '" + spec + "' (expected name=1x3x224x224)");
  std::string name = spec.substr(0, eq);
  std::string dims = spec.substr(eq + 1);
  Shape shape;
  size_t start = 0;
  while (!dims.empty() && start <= dims.size()) {
    size_t x = dims.find_first_of("x,", start);
    if (x == std::string::npos) x = dims.size();
    shape.push_back(parse_extent(dims.substr(start, x - start), spec));
    start = x + 1;
  }
  return {name, shape};
}

std::pair<std::string, int64_t> parse_max_trip_count(const std::string& spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) throw Error("bad --max-trip-count '" + spec + "' (expected NODE=N)");
  return {spec.substr(0, eq), parse_extent(spec.substr(eq + 1), spec)};
}

std::pair<std::string, int64_t> parse_dim(const std::string& spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) throw Error("bad --dim '" + spec + "' (expected name=N)");
  return {spec.substr(0, eq), parse_extent(spec.substr(eq + 1), spec)};
}

std::pair<std::string, std::vector<double>> parse_frozen_value(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw Error("bad --freeze '" + spec + "' (expected name=value or name=v1,v2,...)");
  std::vector<double> values;
  for (size_t start = eq + 1; start <= spec.size();) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size()) throw Error("bad --freeze '" + spec + "': '" + item + "' is not a number");
    values.push_back(v);
    start = comma + 1;
  }
  return {spec.substr(0, eq), values};
}

Tensor literal_input(const Graph& g, const std::string& name, const std::vector<double>& values, const ShapeBindings& b,
                     const std::string& flag) {
  const std::vector<Dim>& declared = g.declared_input_dims.at(name);
  Shape shape;
  bool known = true;
  for (const Dim& d : declared) {
    known &= d.known();
    shape.push_back(d.value);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  auto bound = b.input_shapes.find(name);
  if (!known) shape = bound != b.input_shapes.end() ? bound->second : n == 1 && declared.empty() ? Shape{} : Shape{n};
  if (num_elements(shape) != n || shape.size() != declared.size())
    throw Error(g.source + ": " + flag + " " + name + " gives " + std::to_string(n) + " values; the input is declared " +
                dims_str(declared));
  return Tensor::from_doubles(g.value(name).dtype, shape, values);
}

std::map<std::string, Tensor> frozen_inputs(const Graph& g, const ShapeBindings& b) {
  std::map<std::string, Tensor> out = b.frozen;
  for (const auto& [name, values] : b.frozen_values) {
    if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end() || g.composite_inputs.count(name))
      throw Error(g.source + ": cannot freeze '" + name + "', which is not a tensor graph input");
    out[name] = literal_input(g, name, values, b, "--freeze");
  }
  return out;
}

void bind_input_shapes(Graph& g, const ShapeBindings& given) {
  ShapeBindings b = given;
  b.frozen = frozen_inputs(g, given);
  for (const auto& [name, bound] : b.max_trip_counts) {
    auto loop = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.name == name && n.op_type == "Loop"; });
    if (loop == g.nodes.end()) throw Error(g.source + ": --max-trip-count " + name + ": the graph has no Loop node of that name");
    loop->attrs[kMaxTripCountAttr] = AttrValue(bound);
  }
  for (const auto& [name, shape] : b.input_shapes)
    if (!g.declared_input_dims.count(name) &&
        !(g.composite_inputs.count(name) && g.composite_inputs.at(name).kinds == std::vector{ValueKind::Optional}))
      throw Error(g.source + ": '" + name + "' is given a shape or a value (--input-shape, --input) but is not a graph input");
  for (const auto& [name, t] : b.frozen) {
    auto it = std::find(g.inputs.begin(), g.inputs.end(), name);
    if (it == g.inputs.end() || g.composite_inputs.count(name))
      throw Error(g.source + ": cannot freeze '" + name + "', which is not a tensor graph input");
    Value& v = g.value(name);
    if (v.dtype != t.dtype())
      throw Error(g.source + ": graph input '" + name + "' is " + dtype_name(v.dtype) + ", frozen value is " +
                  dtype_name(t.dtype()));
    v.shape = t.shape();
    v.typed = true;
    v.constant = std::make_shared<const Tensor>(t);
    g.inputs.erase(it);
  }
  bind_composite_inputs(g, b);
  for (const std::string& name : g.inputs) {
    auto declared = g.declared_input_dims.find(name);
    if (declared == g.declared_input_dims.end()) continue;  // a sequence's or optional's tensor, bound above
    Value& v = g.value(name);
    v.shape = bound_shape(g, name, declared->second, b);
    v.typed = true;
  }
}

}  // namespace kiln
