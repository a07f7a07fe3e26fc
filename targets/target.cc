// Reading target files. Validation is strict on purpose: a typo in a target file would otherwise give a
// schedule tuned for the wrong machine with no error anywhere, so every message names the file and the
// field, and unknown keys are errors rather than ignored.
#include "targets/target.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>


#ifndef KILN_DEFAULT_TARGETS_DIR
#error "KILN_DEFAULT_TARGETS_DIR must be defined by the build (targets/CMakeLists.txt)"
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;

const char* type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Reads the fields of one TOML table. `prefix` makes nested fields read as "cache.l1d" in messages.
class Fields {
 public:
  Fields(const std::string& file, const toml::table& table, std::string prefix)
      : file_(file), table_(table), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw TargetError(file_ + ": field '" + prefix_ + key + "': " + what);
  }

  // Every key must be one we read: a misspelt optional field would otherwise vanish silently.
  void reject_unknown(std::initializer_list<const char*> known) const {
    for (auto&& [k, v] : table_) {
      (void)v;
      bool ok = std::any_of(known.begin(), known.end(), [&](const char* n) { return k.str() == n; });
      if (!ok) {
        std::vector<std::string> names(known.begin(), known.end());
        throw TargetError(file_ + ": unknown field '" + prefix_ + std::string(k.str()) + "' (expected one of: " +
                    join(names) + ")");
      }
    }
  }

  const toml::node* get(const std::string& key, bool required) const {
    const toml::node* n = table_.get(key);
    if (!n && required) throw TargetError(file_ + ": missing field '" + prefix_ + key + "'");
    return n;
  }

  std::string str(const std::string& key, bool required = true, bool allow_empty = false) const {
    const toml::node* n = get(key, required);
    if (!n) return {};
    if (!n->is_string()) fail(key, std::string("expected a string, got ") + type_name(n->type()));
    std::string s = n->as_string()->get();
    if (s.empty() && !allow_empty) fail(key, "must not be empty");
    return s;
  }

  int64_t integer(const std::string& key, int64_t min, int64_t max) const {
    return integer(key, min, max, std::nullopt);
  }

  // An optional integer: `fallback` when the key is absent.
  int64_t integer(const std::string& key, int64_t min, int64_t max, std::optional<int64_t> fallback) const {
    const toml::node* n = get(key, !fallback);
    if (!n) return *fallback;
    if (!n->is_integer()) fail(key, std::string("expected an integer, got ") + type_name(n->type()));
    int64_t v = n->as_integer()->get();
    if (v < min || v > max)
      fail(key, std::to_string(v) + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return v;
  }

  bool boolean(const std::string& key, bool fallback) const {
    const toml::node* n = get(key, false);
    if (!n) return fallback;
    if (!n->is_boolean()) fail(key, std::string("expected true or false, got ") + type_name(n->type()));
    return n->as_boolean()->get();
  }

  const toml::table* table(const std::string& key, bool required) const {
    const toml::node* n = get(key, required);
    if (!n) return nullptr;
    if (!n->is_table()) fail(key, std::string("expected a table, got ") + type_name(n->type()));
    return n->as_table();
  }

  std::string sub_prefix(const std::string& key) const { return prefix_ + key + "."; }

 private:
  const std::string& file_;
  const toml::table& table_;
  std::string prefix_;
};

constexpr int64_t kMaxBytes = int64_t{1} << 40;

// LLVM accepts "+a,-b"; anything else (a bare "avx2") is silently ignored by LLVM, so catch it here.
void check_features(const Fields& f, const std::string& features) {
  if (features.empty()) return;
  std::stringstream ss(features);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.size() < 2 || (item[0] != '+' && item[0] != '-'))
      f.fail("features", "item '" + item + "' must be +name or -name");
  }
  if (features.back() == ',') f.fail("features", "trailing ','");
}

// The [bare_metal] table: two regions that must not overlap, and a stack that fits in SRAM. Addresses
// are 32-bit: every bare-metal target kiln knows is a Cortex-M.
BareMetalMemory bare_metal_memory(const std::string& file, const Fields& top, const toml::table& table) {
  Fields f(file, table, top.sub_prefix("bare_metal"));
  f.reject_unknown({"flash_origin", "flash_bytes", "sram_origin", "sram_bytes", "stack_bytes"});
  constexpr int64_t k4G = int64_t{1} << 32;
  BareMetalMemory m;
  m.flash_origin = f.integer("flash_origin", 0, k4G - 1);
  m.flash_bytes = f.integer("flash_bytes", 1, k4G - m.flash_origin);
  m.sram_origin = f.integer("sram_origin", 0, k4G - 1);
  m.sram_bytes = f.integer("sram_bytes", 1, k4G - m.sram_origin);
  m.stack_bytes = f.integer("stack_bytes", 256, m.sram_bytes);
  if (m.flash_origin < m.sram_origin + m.sram_bytes && m.sram_origin < m.flash_origin + m.flash_bytes)
    f.fail("sram_origin", "SRAM overlaps flash");
  return m;
}

Target parse_target(const std::string& file, const std::string& name) {
  std::ifstream in(file, std::ios::binary);
  if (!in || !fs::is_regular_file(file)) throw TargetError(file + ": cannot read target file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();

  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    std::string desc(e.description());
    std::replace(desc.begin(), desc.end(), '\n', ' ');
    throw TargetError(file + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": TOML syntax error: " + desc);
  }

  Target t;
  t.name = name;
  t.file = file;
  Fields top(file, root, "");
  top.reject_unknown({"description", "triple", "cpu", "features", "vector_bits", "cores", "cc", "run_prefix",
                      "fused_multiply_add", "huge_page_bytes", "cache", "gpu", "bare_metal"});
  t.description = top.str("description", /*required=*/false);
  t.triple = top.str("triple");
  t.cpu = top.str("cpu");
  t.features = top.str("features", true, /*allow_empty=*/true);
  check_features(top, t.features);
  t.vector_bits = static_cast<int>(top.integer("vector_bits", 0, 1 << 20));
  if (t.vector_bits != 32 && t.vector_bits != 128 && t.vector_bits != 256 && t.vector_bits != 512)
    top.fail("vector_bits", "unknown vector width " + std::to_string(t.vector_bits) +
                                " (expected 128, 256 or 512, or 32 for a core without float SIMD)");
  t.cores = static_cast<int>(top.integer("cores", 1, 1 << 16));
  t.fused_multiply_add = top.boolean("fused_multiply_add", false);
  t.huge_page_bytes = top.integer("huge_page_bytes", 0, kMaxBytes, 0);
  if (t.huge_page_bytes != 0 && (t.huge_page_bytes < 4096 || (t.huge_page_bytes & (t.huge_page_bytes - 1)) != 0))
    top.fail("huge_page_bytes", std::to_string(t.huge_page_bytes) + " is not 0 or a power of two of at least 4096");
  t.cc = top.str("cc");
  t.run_prefix = top.str("run_prefix", true, /*allow_empty=*/true);

  const toml::table* cache = top.table("cache", true);
  Fields c(file, *cache, top.sub_prefix("cache"));
  c.reject_unknown({"l1d", "l2", "l3"});
  t.l1d_bytes = c.integer("l1d", 1, kMaxBytes);
  t.l2_bytes = c.integer("l2", 1, kMaxBytes);
  t.l3_bytes = c.integer("l3", 0, kMaxBytes);

  if (const toml::table* gpu = top.table("gpu", false)) {
    Fields g(file, *gpu, top.sub_prefix("gpu"));
    g.reject_unknown({"shared_memory", "threads_per_block", "warp_size"});
    GpuLimits limits;
    limits.shared_memory_bytes = g.integer("shared_memory", 1, kMaxBytes);
    limits.max_threads_per_block = static_cast<int>(g.integer("threads_per_block", 1, 1 << 16));
    limits.warp_size = static_cast<int>(g.integer("warp_size", 1, 1024));
    t.gpu = limits;
  }
  if (const toml::table* bm = top.table("bare_metal", false)) {
    if (t.gpu) top.fail("bare_metal", "a target is a GPU or a bare-metal board, not both");
    t.bare_metal = bare_metal_memory(file, top, *bm);
  }
  return t;
}

std::vector<std::string> target_names(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw TargetError("targets directory '" + dir + "' does not exist (set KILN_TARGETS_DIR to the directory of target files)");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".toml" && e.is_regular_file()) names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string targets_dir() {
  const char* env = std::getenv("KILN_TARGETS_DIR");
  if (env && *env) return env;
  return KILN_DEFAULT_TARGETS_DIR;
}

Target load_target(const std::string& name_or_path) {
  if (name_or_path == "host") return host_target();
  if (name_or_path.empty()) throw TargetError("empty target name (see `kiln targets`)");
  bool is_path = name_or_path.find('/') != std::string::npos ||
                 (name_or_path.size() > 5 && name_or_path.ends_with(".toml"));
  if (is_path) return parse_target(name_or_path, fs::path(name_or_path).stem().string());

  std::string dir = targets_dir();
  std::string file = (fs::path(dir) / (name_or_path + ".toml")).string();
  if (!fs::exists(file)) {
    std::vector<std::string> names;
    try {
      names = target_names(dir);
    } catch (const TargetError&) {
    }
    throw TargetError("unknown target '" + name_or_path + "': no file " + file +
                (names.empty() ? std::string() : " (available: " + join(names) + ")"));
  }
  return parse_target(file, name_or_path);
}

std::vector<Target> list_targets() {
  std::string dir = targets_dir();
  std::vector<Target> out;
  for (const auto& name : target_names(dir)) out.push_back(parse_target((fs::path(dir) / (name + ".toml")).string(), name));
  return out;
}

std::optional<std::string> host_target_name() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // x86-64-v4's AVX-512 subset; a CPU with only AVX512F (Knights Landing) gets the AVX2 target.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return __builtin_cpu_supports("avx512vnni") ? "x86_64-avx512-vnni" : "x86_64-avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return __builtin_cpu_supports("avxvnni") ? "x86_64-avx2-vnni" : "x86_64-avx2";
  return "x86_64-generic";
#else
  return std::nullopt;
#endif
}

Target host_target() {
  auto name = host_target_name();
  if (!name) throw TargetError("no shipped target matches this host's CPU; pass --target NAME or a .toml file");
  return load_target(*name);
}

}  // namespace kiln
