/// \file What kiln knows about the machine it compiles for. Every later stage (tiling, vectorization,
/// parallelization, LLVM's TargetMachine, the measurement builder and runner) reads these facts from one
/// struct instead of asking the host, so cross-compiling and tuning for a board behave the same as
/// compiling for the host. Targets are data (targets/*.toml, see docs/targets.md) so that adding a
/// board needs no code change.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

/// A bad target name or file: one line naming the file and field. Its own type, not the frontend's
/// kiln::Error, because targets/ sits below every part of the compiler and includes none of it; the
/// driver reports both the same way (exit code 2).
class TargetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Limits a GPU schedule must respect. Only CUDA targets have them; CPU targets leave Target::gpu empty.
struct GpuLimits {
  int64_t shared_memory_bytes = 0;  ///< shared memory per block
  int max_threads_per_block = 0;
  int warp_size = 0;
};

/// Where a bare-metal board keeps code and data (the `[bare_metal]` table). Its presence makes a target
/// bare-metal: no OS, so a package is linked with a startup file and a linker script kiln writes from
/// these numbers (runtime/baremetal/), weights in flash and the arena, stack and heap in SRAM.
struct BareMetalMemory {
  int64_t flash_origin = 0;  ///< first address of the code and read-only data region
  int64_t flash_bytes = 0;
  int64_t sram_origin = 0;   ///< first address of the read-write region (.data, .bss, heap, stack)
  int64_t sram_bytes = 0;
  int64_t stack_bytes = 0;   ///< reserved at the top of SRAM; the link fails when SRAM cannot hold it
};

/// One target, as read from its TOML file. Every field is required unless marked optional, so a
/// schedule never silently runs on a default the user did not choose.
struct Target {
  std::string name;         ///< the file's stem: `--target NAME` finds targets/NAME.toml
  std::string file;         ///< the file it was read from (for messages and tuning records)
  std::string description;  ///< optional, one line for `kiln targets`

  std::string triple;    ///< LLVM target triple, e.g. aarch64-unknown-linux-gnu
  std::string cpu;       ///< LLVM CPU name, e.g. cortex-a72, x86-64-v4
  std::string features;  ///< LLVM feature string, e.g. "+avx2,+fma" (may be empty)
  int vector_bits = 0;   ///< widest float SIMD register the schedules use: 128, 256 or 512; 32 for none
  int cores = 0;         ///< cores the parallel loops are planned for
  bool fused_multiply_add = false;  ///< optional `fused_multiply_add`: emit FMA for a*b+c (bench/RESULTS.md)
  /// Optional `huge_page_bytes`: the size of the OS's huge pages (2 MiB on x86-64 and AArch64 Linux with
  /// 4 KiB base pages), 0 for none. A package's weights start on such a boundary when they fill one, so
  /// the kernel can map them with huge pages (docs/targets.md says why).
  int64_t huge_page_bytes = 0;

  int64_t l1d_bytes = 0;  ///< L1 data cache per core
  int64_t l2_bytes = 0;   ///< L2 (per core or per cluster, whichever a core sees)
  int64_t l3_bytes = 0;   ///< last-level cache; 0 when the target has none

  /// C compiler driver that compiles and links measurement modules and runners for this target
  /// (`cc` natively, `aarch64-linux-gnu-gcc` for AArch64 boards).
  std::string cc;
  /// Command prefix that runs a target binary on this machine: empty when the target runs natively,
  /// e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu` for AArch64. Whitespace-separated words.
  std::string run_prefix;

  std::optional<GpuLimits> gpu;  ///< optional [gpu] table, for CUDA targets
  std::optional<BareMetalMemory> bare_metal;  ///< optional [bare_metal] table, for boards with no OS

  /// Vector lanes for elements of `elem_bytes` bytes (16 for f32 on a 512-bit target).
  int vector_lanes(int elem_bytes) const { return vector_bits / (8 * elem_bytes); }
  /// True when binaries for this target run directly on the machine running kiln.
  bool runs_natively() const { return run_prefix.empty() && !bare_metal; }
};

/// The directory `--target NAME` looks in: $KILN_TARGETS_DIR when set, otherwise the repository's
/// targets/ directory (compiled in), so an installed or relocated kiln can be pointed at its files.
std::string targets_dir();

/// Loads a target by name (targets_dir()/NAME.toml) or from a path to a .toml file; an argument with a
/// '/' or ending in ".toml" is a path. Throws TargetError with a one-line message naming the file and
/// the field at fault: unknown name, unreadable file, TOML syntax, missing field, wrong type, bad value
/// (e.g. an unsupported vector width) or an unknown key (most likely a typo, so never ignored).
/// "host" is host_target().
Target load_target(const std::string& name_or_path);

/// Every target in targets_dir(), sorted by name. A malformed file throws like load_target.
std::vector<Target> list_targets();

/// Name of the shipped target that best matches the CPU running kiln (x86_64-avx512, -avx2 or
/// -generic), or nullopt on a host kiln has no such target for.
std::optional<std::string> host_target_name();

/// load_target(host_target_name()); throws TargetError when there is no host target.
Target host_target();

/// Whether LLVM feature string `features` ("+avx2,+fma,-avx512f") turns `feature` ("+avx2") on.
inline bool has_feature(const std::string& features, const std::string& feature) {
  return ("," + features + ",").find("," + feature + ",") != std::string::npos;
}

}  // namespace kiln
