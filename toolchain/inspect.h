/// \file `kiln inspect`: what a model is, in numbers.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/passes/bind_input_shapes.h"

namespace kiln {

struct ModelSummary {
  struct IO {
    std::string name;
    DType dtype;
    std::string declared;  // as the model declares it ("batchx3x224x224")
    Shape shape;           // bound
  };
  std::string file;
  int64_t ir_version = 0;
  int64_t opset = 0;
  std::vector<IO> inputs, outputs;
  std::map<std::string, int> op_histogram;  // over the nodes as imported
  int64_t imported_nodes = 0;
  int64_t runtime_nodes = 0;  // after folding and dead-node removal
  int64_t parameters = 0;     // elements of the constants that run-time nodes read
  int64_t parameter_bytes = 0;
  double flops = 0;           // over runtime nodes; 2 per multiply-add (docs/ops.md)
  std::vector<std::string> defaulted_dims;  // symbolic dims bound to 1 because the user gave none
  std::string node_table;     // per-node output shapes (for --verbose)
  std::string task_table;     // tuning tasks (when asked for; see task_table.h)
};

/// Imports and analyses a model. Symbolic input dims the user did not bind are set to 1 (and listed
/// in `defaulted_dims`) so that shapes and FLOPs can still be reported. With `tasks`, also partitions
/// the graph and extracts its tuning tasks into `task_table`.
ModelSummary summarize_model(const std::string& path, ShapeBindings bindings, bool tasks = false);
std::string format_summary(const ModelSummary& s, bool verbose);

}  // namespace kiln
