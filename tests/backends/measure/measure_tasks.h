/// \file Test-only tuning tasks shared by the builder and runner tests: a small model written to a
/// temporary file, loaded, partitioned, and the task with a given anchor op taken from it.
#pragma once
#include <string>

#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "scheduler/tasks/task.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln::testing {

/// The task of `mb` whose anchor op is `anchor`; throws when there is none.
inline Task task_of(ModelBuilder& mb, const std::string& anchor) {
  TempDir dir;
  mb.save(dir.path("m.onnx"));
  Graph g = load_model(dir.path("m.onnx"), PipelineOptions{});
  for (Task& t : extract_tasks(g, partition_graph(g)))
    if (t.anchor == anchor) return t;
  throw Error("test: no " + anchor + " task");
}

/// a[48,40] x w[40,56] (seeded weights) -> Relu: the MatMul task (Relu fused into it).
inline Task matmul_relu_task() {
  ModelBuilder b("matmul", 17);
  b.input("a", DType::Float32, Shape{48, 40});
  b.initializer("w", random_weights({40, 56}, 3));
  b.node("MatMul", {"a", "w"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  b.output("y", DType::Float32, Shape{48, 56});
  return task_of(b, "MatMul");
}

}  // namespace kiln::testing
