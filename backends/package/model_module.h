/// \file The codegen stage: a lowered, memory-planned model as one LLVM module for its target.
///
/// The module holds the model's kernel function (backends/llvm), every weight as a const global in the
/// section .rodata.<m>.weights (so a linker script can put them in flash), and the C entry points
/// (entry_function.h). The package stage (package.h) only turns it into files.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/llvm/emit_object.h"
#include "backends/package/memory_plan.h"
#include "frontend/ir/graph.h"
#include "scheduler/lower/lower_model.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::package {

/// One graph input or output as the C ABI shows it.
struct IoInfo {
  std::string name;    // ONNX name
  std::string c_name;  // field of <m>_inputs / <m>_outputs
  DType dtype;
  Shape shape;
  int64_t bytes;
  /// An output whose extent along `count_axis` is decided at run time (Graph::count_outputs): the
  /// output holding how many entries along it are valid; "" otherwise.
  std::string count;
  int64_t count_axis = -1;
};

/// The graph's inputs and outputs, in the graph's order, with unique C field names.
struct ModelIo {
  std::vector<IoInfo> inputs, outputs;
  std::vector<std::string> limits;  // Graph::limits, which the header repeats
};
ModelIo model_io(const Graph& g);

/// One stage of one subgraph's compute DAG, for the package metadata.
struct KernelStage {
  std::string stage, tag;
  int subgraph = 0;
};

struct CodegenOptions {
  std::string name = "model";  // C prefix: <name>_run, <NAME>_WORKSPACE_SIZE, lib<name>.a
  llvm_backend::MachineSpec machine;
  int vector_bits = 512;
  int64_t huge_page_bytes = 0;  // the target's (targets/target.h); 0: weights are 64-byte aligned only
};

/// The codegen stage's result. Members are declared so the module is destroyed before its context.
struct ModelModule {
  CodegenOptions options;
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> target_machine;
  ModelIo io;
  int64_t workspace_size = 0, workspace_lower_bound = 0, weights_bytes = 0;
  int intermediates = 0;
  int in_place_writes = 0;                // outputs the plan puts over a dying input (memory_plan.h)
  int64_t workspace_in_graph_order = 0;   // when the subgraphs were reordered for memory: the arena before
  /// Hash of the printed program and the weights' bytes: it changes exactly when the code could.
  std::string model_hash;
  std::set<std::string> runtime_kernels;  // runtime/kernels/ the code calls (extern calls' callees)
  std::vector<KernelStage> kernels;

  ModelModule();
  ModelModule(ModelModule&&) noexcept;
  ModelModule& operator=(ModelModule&&) noexcept;
  ~ModelModule();
};

/// Generates the module of `prog` with the workspace offsets of `plan`. Throws Error when the program
/// and the plan disagree or LLVM rejects the module.
ModelModule generate_model_module(const lower::ModelProgram& prog, const ModelMemoryPlan& plan, ModelIo io,
                                  const CodegenOptions& opts);

/// The module's LLVM IR before optimisation, with each weight's initializer left out (one line per
/// global: name, bytes, section), for `--dump-after codegen`.
std::string print_model_module(const ModelModule& m);

}  // namespace kiln::package
