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

}  // namespace

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
    if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end())
      throw Error(g.source + ": cannot freeze '" + name + "', which is not a graph input");
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
    if (!g.declared_input_dims.count(name))
      throw Error(g.source + ": '" + name + "' is given a shape or a value (--input-shape, --input) but is not a graph input");
  for (const auto& [name, t] : b.frozen) {
    auto it = std::find(g.inputs.begin(), g.inputs.end(), name);
    if (it == g.inputs.end()) throw Error(g.source + ": cannot freeze '" + name + "', which is not a graph input");
    Value& v = g.value(name);
    if (v.dtype != t.dtype())
      throw Error(g.source + ": graph input '" + name + "' is " + dtype_name(v.dtype) + ", frozen value is " +
                  dtype_name(t.dtype()));
    v.shape = t.shape();
    v.typed = true;
    v.constant = std::make_shared<const Tensor>(t);
    g.inputs.erase(it);
  }
  for (const std::string& name : g.inputs) {
    const auto& declared = g.declared_input_dims.at(name);
    Value& v = g.value(name);
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
          throw Error(where + ": bound shape " + shape_str(shape) + " disagrees with the declared " +
                      dims_str(declared) + " at axis " + std::to_string(i));
    } else {
      for (size_t i = 0; i < declared.size(); ++i) {
        const Dim& d = declared[i];
        if (d.known()) {
          shape.push_back(d.value);
          continue;
        }
        auto bd = d.param.empty() ? b.dims.end() : b.dims.find(d.param);
        if (bd == b.dims.end())
          throw Error(where + ": dimension " + (d.param.empty() ? "?" : "'" + d.param + "'") + " at axis " +
                      std::to_string(i) + " is not bound (use --input-shape " + name + "=... or --dim " +
                      (d.param.empty() ? "NAME" : d.param) + "=N)");
        shape.push_back(bd->second);
      }
    }
    v.shape = shape;
    v.typed = true;
  }
}

}  // namespace kiln
