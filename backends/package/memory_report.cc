#include "backends/package/memory_report.h"

#include <fmt/format.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

#include "frontend/ir/error.h"

namespace kiln::package {

void add_object_sizes(const std::filesystem::path& object, const std::string& weights_section, MemoryReport& r) {
  auto file = llvm::object::ObjectFile::createObjectFile(object.string());
  if (!file) {
    std::string msg = llvm::toString(file.takeError());
    throw Error(object.string() + ": cannot read the object file for the memory report: " + msg);
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(file->getBinary());
  if (!elf) throw Error(object.string() + ": not an ELF object (the memory report reads ELF sections)");
  for (const llvm::object::ELFSectionRef section : elf->sections()) {
    const uint64_t flags = section.getFlags();
    if (!(flags & llvm::ELF::SHF_ALLOC)) continue;
    llvm::Expected<llvm::StringRef> name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == weights_section) continue;
    const int64_t bytes = static_cast<int64_t>(section.getSize());
    const bool in_file = section.getType() != llvm::ELF::SHT_NOBITS;
    if (in_file) r.code_bytes += bytes;
    if (flags & llvm::ELF::SHF_WRITE) r.static_ram_bytes += bytes;
  }
}

std::string memory_report_text(const MemoryReport& r) {
  auto kib = [](int64_t b) { return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024.0); };
  std::string s = fmt::format("memory: flash {} (code {}, weights {}); SRAM {} (arena {}, lower bound {}; stack {}",
                              kib(r.flash_bytes()), kib(r.code_bytes), kib(r.weights_bytes), kib(r.sram_bytes()),
                              kib(r.arena_bytes), kib(r.arena_lower_bound), kib(r.stack.bytes));
  if (r.static_ram_bytes) s += fmt::format("; library data {}", kib(r.static_ram_bytes));
  s += ")";
  if (r.in_place_writes) s += fmt::format("; {} outputs written over their inputs", r.in_place_writes);
  if (r.arena_in_graph_order) s += fmt::format("; subgraphs reordered for memory: arena {} in the graph's order", kib(r.arena_in_graph_order));
  if (!r.stack.not_counted.empty()) {
    std::string names;
    for (const std::string& n : r.stack.not_counted) names += (names.empty() ? "" : ", ") + n;
    s += "; the stack leaves out the frames of " + names;
  }
  if (r.stack.dynamic) s += "; some frame has a run-time size (its static part is counted)";
  return s + "\n";
}

}  // namespace kiln::package
