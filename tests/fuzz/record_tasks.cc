#include "tests/fuzz/record_tasks.h"

#include "frontend/layout/block_layout.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/partition/partition.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/fold_into_conv.h"
#include "frontend/passes/gemm_weights.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/zoo/zoo.h"

namespace kiln::fuzz {

std::vector<Task> record_tasks() {
  std::vector<Task> tasks;
  auto add = [&](const std::string& name, const ZooOptions& o) {
    Graph g = import_onnx_bytes(build_zoo_model(name, o).serialize(), name);
    ShapeBindings batch;
    batch.dims["batch"] = 1;  // the zoo's CNNs name their batch dimension
    bind_input_shapes(g, batch);
    infer_shapes(g);
    fold_into_conv(g);
    block_layout(g, float_block_for(512));
    transpose_gemm_weights(g);
    remove_dead_nodes(g);
    for (Task& t : extract_tasks(g, partition_graph(g))) tasks.push_back(std::move(t));
  };
  add("tiny_cnn", ZooOptions{});
  ZooOptions mm;
  mm.m = 8, mm.n = 24, mm.k = 40;
  add("matmul", mm);
  return tasks;
}

}  // namespace kiln::fuzz
