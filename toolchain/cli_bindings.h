/// \file The `--input-shape` and `--dim` options every command that loads a model accepts: models with
/// symbolic dimensions need them bound before shapes (and so tasks) exist.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "frontend/passes/bind_input_shapes.h"
#include "toolchain/pipeline.h"

namespace kiln {

struct BindingArgs {
  std::vector<std::string> input_shapes, dims, frozen, max_trip_counts, sequences, absent;
  void add_to(CLI::App* app) {
    app->add_option("--input-shape", input_shapes, "Bind an input's shape: name=1x3x224x224 (repeatable)");
    app->add_option("--dim", dims, "Bind a symbolic dimension: batch=1 (repeatable)");
    app->add_option("--freeze", frozen,
                    "Fix a graph input's value at compile time: name=16000 or name=1,2,3 (repeatable); an If on it folds");
    app->add_option("--max-trip-count", max_trip_counts,
                    "Bound a Loop whose trip count is known only at run time: NODE=N (repeatable); it runs at most N iterations");
    app->add_option("--sequence", sequences,
                    "Bind a sequence input's tensors: name=2x3;4x3 (name= when empty; repeatable); the package takes them "
                    "as inputs name.0, name.1, ...");
    app->add_option("--absent", absent, "Compile an optional input as empty (repeatable); by default it holds a tensor");
  }
  ShapeBindings parse() const {
    ShapeBindings b;
    for (const auto& s : input_shapes) b.input_shapes.insert(parse_input_shape(s));
    for (const auto& s : dims) b.dims.insert(parse_dim(s));
    for (const auto& s : frozen) b.frozen_values.insert(parse_frozen_value(s));
    for (const auto& s : max_trip_counts) b.max_trip_counts.insert(parse_max_trip_count(s));
    for (const auto& s : sequences) b.composite.insert(parse_sequence_shapes(s));
    b.absent.insert(absent.begin(), absent.end());
    return b;
  }
};

}  // namespace kiln
