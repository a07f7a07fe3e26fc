/// \file Binding symbolic input dimensions to numbers.
#pragma once
#include <map>
#include <set>
#include <string>

#include "frontend/ir/graph.h"

namespace kiln {

/// The tensors a sequence or optional graph input holds, for binding: a tensor's shape, a sequence's
/// elements, an optional's one element or none.
struct IoLayout {
  ValueKind kind = ValueKind::Tensor;
  Shape shape;
  std::vector<IoLayout> elements;
};

/// What the user fixed on the command line: whole input shapes (`--input-shape x=1x3x224x224`) and
/// named dimensions (`--dim batch=1`).
struct ShapeBindings {
  std::map<std::string, Shape> input_shapes;
  std::map<std::string, int64_t> dims;
  /// Inputs fixed to a value at compile time, which turns them into constants: how a static-shape
  /// compiler accepts a model whose shapes depend on an input (a Reshape target fed as an input).
  std::map<std::string, Tensor> frozen;
  /// Inputs frozen from the command line (`--freeze sr=16000`): values in row-major order, given the
  /// input's declared dtype, and its declared shape when that is fully known (a scalar, a vector of
  /// the values otherwise).
  std::map<std::string, std::vector<double>> frozen_values;
  /// Bounds for Loops whose trip count is known only at run time (`--max-trip-count NODE=N`), by the
  /// Loop node's name (unroll_loops.h).
  std::map<std::string, int64_t> max_trip_counts;
  /// Sequence and optional inputs (Graph::composite_inputs): the tensors each holds. An optional
  /// tensor without one is bound as present, its shape as a tensor input's; `absent` ones are empty.
  std::map<std::string, IoLayout> composite;
  std::set<std::string> absent;
};

/// kiln compiles static shapes only, so every graph input must end with a known shape: a declared
/// number, a bound name, or a whole-shape binding that agrees with what the model declares. Fails
/// naming the input and the axis otherwise; a binding for an input the model lacks is an error too.
/// A sequence or optional input is replaced in `g.inputs` by the tensors it holds (Graph::io_parts),
/// named "<input>.<i>" (a sequence's element i) and "<input>.value" (an optional's value).
void bind_input_shapes(Graph& g, const ShapeBindings& b);

/// Parses "name=1x3x224x224" (or "name=" for a scalar) into a binding; throws Error on bad syntax.
std::pair<std::string, Shape> parse_input_shape(const std::string& spec);
/// Literal values for graph input `name` of `g` (not yet bound): a tensor of the declared dtype, in
/// the declared shape when it is fully known, else the shape `b` binds, else a scalar (one value for
/// a rank-0 input) or a vector. Throws Error naming `flag` and the input when the values do not fill it.
Tensor literal_input(const Graph& g, const std::string& name, const std::vector<double>& values, const ShapeBindings& b,
                     const std::string& flag);
/// The values `b` freezes, as tensors: `b.frozen` and `b.frozen_values`, the latter in the dtype and
/// shape `g` (not yet bound) declares. Throws Error for a name that is no graph input.
std::map<std::string, Tensor> frozen_inputs(const Graph& g, const ShapeBindings& b);
/// Parses "name=v1,v2,..." (numbers) for ShapeBindings::frozen_values.
std::pair<std::string, std::vector<double>> parse_frozen_value(const std::string& spec);
/// Parses "NODE=N" for ShapeBindings::max_trip_counts (N >= 0).
std::pair<std::string, int64_t> parse_max_trip_count(const std::string& spec);
/// Parses "name=2x3;4x3" (or "name=" for an empty sequence) into the layout of a sequence input.
std::pair<std::string, IoLayout> parse_sequence_shapes(const std::string& spec);
/// Parses "batch=1".
std::pair<std::string, int64_t> parse_dim(const std::string& spec);

}  // namespace kiln
