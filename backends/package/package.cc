#include "backends/package/package.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "backends/package/board_files.h"
#include "backends/package/c_compiler.h"
#include "backends/package/file_io.h"
#include "backends/package/package_text.h"
#include "backends/package/runtime_sources.h"
#include "frontend/ir/error.h"

namespace kiln::package {
namespace fs = std::filesystem;

namespace {

nlohmann::json memory_json(const MemoryReport& r) {
  return {{"flash_bytes", r.flash_bytes()},
          {"code_bytes", r.code_bytes},
          {"weights_bytes", r.weights_bytes},
          {"sram_bytes", r.sram_bytes()},
          {"arena_bytes", r.arena_bytes},
          {"arena_lower_bound", r.arena_lower_bound},
          {"in_place_writes", r.in_place_writes},
          {"arena_in_graph_order_bytes", r.arena_in_graph_order},
          {"stack_bytes", r.stack.bytes},
          {"stack_not_counted", r.stack.not_counted},
          {"stack_dynamic", r.stack.dynamic},
          {"library_data_bytes", r.static_ram_bytes}};
}

nlohmann::json metadata(const ModelModule& m, const PackageOptions& o, bool pool_object, const MemoryReport& memory) {
  const std::string& name = m.options.name;
  nlohmann::json j;
  j["name"] = name;
  j["abi_version"] = 1;
  j["model_hash"] = m.model_hash;
  j["source"] = o.source;
  j["target"] = {{"name", o.target_name}, {"file", o.target_file}, {"triple", m.options.machine.triple}, {"cpu", m.options.machine.cpu},
                 {"features", m.options.machine.features}, {"vector_bits", m.options.vector_bits}};
  auto io_json = [](const IoInfo& io) {
    nlohmann::json j{{"name", io.name}, {"c_name", io.c_name}, {"dtype", dtype_name(io.dtype)}, {"shape", io.shape}, {"bytes", io.bytes}};
    if (!io.count.empty()) j["count"] = {{"output", io.count}, {"axis", io.count_axis}};
    return j;
  };
  j["inputs"] = nlohmann::json::array();
  j["outputs"] = nlohmann::json::array();
  j["kernels"] = nlohmann::json::array();
  for (const auto& io : m.io.inputs) j["inputs"].push_back(io_json(io));
  for (const auto& io : m.io.outputs) j["outputs"].push_back(io_json(io));
  j["memory_plan"] = {{"workspace_bytes", m.workspace_size}, {"peak_liveness_lower_bound", m.workspace_lower_bound},
                      {"alignment", kWorkspaceAlign}, {"intermediates", m.intermediates}};
  j["weights_bytes"] = m.weights_bytes;
  j["memory"] = memory_json(memory);
  j["runtime_kernels"] = m.runtime_kernels;
  for (const KernelStage& k : m.kernels)
    j["kernels"].push_back({{"stage", k.stage}, {"tag", k.tag}, {"subgraph", k.subgraph}, {"schedule", o.schedule}});
  if (o.bare_metal) {
    j["target"]["bare_metal"] = {{"flash_origin", o.bare_metal->flash_origin}, {"flash_bytes", o.bare_metal->flash_bytes},
                                 {"sram_origin", o.bare_metal->sram_origin}, {"sram_bytes", o.bare_metal->sram_bytes},
                                 {"stack_bytes", o.bare_metal->stack_bytes}};
    j["extras"] = {{"cmake_config", name + "Config.cmake"}, {"linker_script", kBoardLinkerScript},
                   {"startup_source", kBoardStartupSource}};
  } else {
    j["extras"] = {{"cmake_config", name + "Config.cmake"},
                   {"parallel_pthread_source", "kiln_parallel_pthread.c"},
                   {"parallel_pthread_object", pool_object ? nlohmann::json("kiln_parallel_pthread.o") : nlohmann::json()}};
  }
  return j;
}

// Writes every file into `tmp`; returns what the package needs of a device's memory.
MemoryReport write_files(ModelModule& m, const PackageOptions& o, const fs::path& tmp) {
  const std::string& name = m.options.name;
  fs::path obj = tmp / (name + ".o");
  MemoryReport memory;
  llvm_backend::emit_object(*m.module, *m.target_machine, obj.string(), &memory.stack);
  // The runtime kernels the model calls, compiled for the target, join the model in the archive.
  const fs::path kernel_dir = tmp / "runtime_kernels";
  std::vector<fs::path> objects = {obj};
  for (const fs::path& k : compile_runtime_kernels(m.runtime_kernels, o.cc, kernel_dir)) objects.push_back(k);
  if (o.bare_metal) objects.push_back(compile_libm_extras(o.cc, kernel_dir));
  for (const fs::path& object : objects) add_object_sizes(object, ".rodata." + name + ".weights", memory);
  memory.weights_bytes = m.weights_bytes;
  memory.arena_bytes = m.workspace_size;
  memory.arena_lower_bound = m.workspace_lower_bound;
  memory.in_place_writes = m.in_place_writes;
  memory.arena_in_graph_order = m.workspace_in_graph_order;
  // A board's memory map is a hard limit: a package that cannot fit would only fail later, at the link.
  const std::string flash = fmt::format("{} bytes of flash (code {}, weights {})", memory.flash_bytes(),
                                        memory.code_bytes, memory.weights_bytes);
  const std::string sram = fmt::format("{} bytes of SRAM (arena {}, stack {})", memory.sram_bytes(), memory.arena_bytes,
                                       memory.stack.bytes);
  auto refuse_over = [&](int64_t need, int64_t limit, const std::string& what, const std::string& whose) {
    if (need > limit) throw Error(fmt::format("{}: needs {}, more than {}", o.source, what, whose));
  };
  if (o.bare_metal) {
    auto of_target = [&](int64_t bytes) { return fmt::format("the {} bytes of the target {}", bytes, o.target_name); };
    refuse_over(memory.flash_bytes(), o.bare_metal->flash_bytes, flash, of_target(o.bare_metal->flash_bytes));
    refuse_over(memory.sram_bytes(), o.bare_metal->sram_bytes, sram, of_target(o.bare_metal->sram_bytes));
  }
  if (o.max_sram_bytes)
    refuse_over(memory.sram_bytes(), *o.max_sram_bytes, sram, "--max-sram " + std::to_string(*o.max_sram_bytes));
  write_archive(tmp / ("lib" + name + ".a"), objects);
  std::error_code ec;
  fs::remove(obj);
  fs::remove_all(kernel_dir, ec);
  bool pool_object = false;
  if (o.bare_metal) {
    // A board has no threads: instead of the pool, what links a program for it (board_files.h).
    write_file(tmp / kBoardLinkerScript, linker_script_text(*o.bare_metal, o.target_name));
    write_file(tmp / kBoardStartupSource, startup_source_text());
  } else {
    // The optional thread pool: shipped beside the library, never inside it (the library stays free
    // of threads; a server links the pool explicitly).
    write_file(tmp / "kiln_parallel_pthread.h", kParallelPthreadH);
    write_file(tmp / "kiln_parallel_pthread.c", kParallelPthreadC);
    pool_object = compile_pool_object(o.cc, tmp);
  }
  write_file(tmp / (name + "Config.cmake"), cmake_config_text(name));
  write_file(tmp / (name + ".h"), header_text(m));
  write_file(tmp / (name + ".json"), metadata(m, o, pool_object, memory).dump(2) + "\n");
  return memory;
}

}  // namespace

PackageInfo write_package(ModelModule& m, const PackageOptions& o, const std::string& dir) {
  MemoryReport memory;
  write_package_dir(dir, [&](const fs::path& tmp) { memory = write_files(m, o, tmp); });
  PackageInfo info;
  info.dir = dir;
  info.inputs = m.io.inputs;
  info.outputs = m.io.outputs;
  info.workspace_size = m.workspace_size;
  info.workspace_lower_bound = m.workspace_lower_bound;
  info.weights_bytes = m.weights_bytes;
  info.model_hash = m.model_hash;
  info.memory = memory;
  return info;
}

}  // namespace kiln::package
