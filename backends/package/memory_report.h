/// \file What a package needs of a device's memory, as firmware authors budget it: flash for the code
/// and the weights, SRAM for the arena and the stack. kiln compile prints it, the package's JSON has it
/// (docs/cortex-m.md), and --max-sram refuses a model whose SRAM need is larger.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/llvm/emit_object.h"

namespace kiln::package {

struct MemoryReport {
  int64_t code_bytes = 0;     ///< the library's code, constants and initialised data: flash, weights aside
  int64_t static_ram_bytes = 0;  ///< the library's own writable data (.data, .bss): 0 for kiln's code
  int64_t weights_bytes = 0;  ///< the weights (const data: flash)
  int64_t arena_bytes = 0;    ///< the workspace the caller passes (SRAM)
  int64_t arena_lower_bound = 0;  ///< peak liveness: what no arena plan can beat
  int in_place_writes = 0;        ///< outputs the arena holds over a dying input's bytes
  int64_t arena_in_graph_order = 0;  ///< when the subgraphs were reordered for a smaller arena: the arena before
  llvm_backend::StackEstimate stack;  ///< the deepest call chain of <m>_run

  int64_t flash_bytes() const { return code_bytes + weights_bytes; }
  /// Arena + stack + the library's writable data; the caller's inputs and outputs are not included.
  int64_t sram_bytes() const { return arena_bytes + stack.bytes + static_ram_bytes; }
};

/// Adds the sizes of `object` (an ELF object file) to `r`: allocated sections that occupy the file go
/// to code_bytes (except `weights_section`, counted as weights elsewhere), writable ones to
/// static_ram_bytes as well (initialised data is copied from flash into RAM at reset).
void add_object_sizes(const std::filesystem::path& object, const std::string& weights_section, MemoryReport& r);

/// Lines for `kiln compile`: flash and SRAM with their parts, the arena against its lower bound, and what
/// the stack estimate leaves out.
std::string memory_report_text(const MemoryReport& r);

}  // namespace kiln::package
