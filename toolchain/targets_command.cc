// Printing for `kiln targets`. Kept apart from main.cc so the driver stays a list of subcommands.
#include "toolchain/targets_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace kiln {
namespace {

std::string bytes_str(int64_t b) {
  if (b == 0) return "0 (none)";
  if (b % (1 << 20) == 0) return fmt::format("{} ({} MiB)", b, b >> 20);
  if (b % (1 << 10) == 0) return fmt::format("{} ({} KiB)", b, b >> 10);
  return fmt::format("{}", b);
}

}  // namespace

std::string format_target_table() {
  std::vector<Target> targets = list_targets();
  std::string host = host_target_name().value_or("");
  size_t name_w = 4, triple_w = 6, cpu_w = 3;
  for (const auto& t : targets) {
    name_w = std::max(name_w, t.name.size());
    triple_w = std::max(triple_w, t.triple.size());
    cpu_w = std::max(cpu_w, t.cpu.size());
  }
  std::string out = fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:>6}  {:>5}\n", "name", name_w, "triple", triple_w, "cpu",
                                cpu_w, "vector", "cores");
  for (const auto& t : targets) {
    out += fmt::format("{} {:<{}}  {:<{}}  {:<{}}  {:>6}  {:>5}\n", t.name == host ? '*' : ' ', t.name, name_w, t.triple,
                       triple_w, t.cpu, cpu_w, t.vector_bits, t.cores);
  }
  out += fmt::format("({} targets in {}; * = this host)\n", targets.size(), targets_dir());
  return out;
}

std::string format_target(const Target& t) {
  std::string out;
  auto line = [&](const char* key, const std::string& value) { out += fmt::format("{:<21} {}\n", key, value); };
  line("name", t.name);
  line("file", t.file);
  if (!t.description.empty()) line("description", t.description);
  line("triple", t.triple);
  line("cpu", t.cpu);
  line("features", t.features.empty() ? "(none)" : t.features);
  line("vector_bits", fmt::format("{} ({} x f32)", t.vector_bits, t.vector_lanes(4)));
  line("cores", std::to_string(t.cores));
  line("fused_multiply_add", t.fused_multiply_add ? "yes" : "no");
  line("huge_page_bytes", t.huge_page_bytes ? bytes_str(t.huge_page_bytes) : "(none)");
  line("cache.l1d", bytes_str(t.l1d_bytes));
  line("cache.l2", bytes_str(t.l2_bytes));
  line("cache.l3", bytes_str(t.l3_bytes));
  line("cc", t.cc);
  line("run_prefix", t.run_prefix.empty() ? "(native)" : t.run_prefix);
  if (t.gpu) {
    line("gpu.shared_memory", bytes_str(t.gpu->shared_memory_bytes));
    line("gpu.threads_per_block", std::to_string(t.gpu->max_threads_per_block));
    line("gpu.warp_size", std::to_string(t.gpu->warp_size));
  } else {
    line("gpu", "(none)");
  }
  if (t.bare_metal) {
    const BareMetalMemory& m = *t.bare_metal;
    line("bare_metal.flash", fmt::format("{:#010x} + {}", m.flash_origin, bytes_str(m.flash_bytes)));
    line("bare_metal.sram", fmt::format("{:#010x} + {}", m.sram_origin, bytes_str(m.sram_bytes)));
    line("bare_metal.stack", bytes_str(m.stack_bytes));
  }
  return out;
}

}  // namespace kiln
