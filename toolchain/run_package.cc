#include "toolchain/run_package.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "backends/cuda/cuda_toolkit.h"
#include "backends/package/board_files.h"
#include "backends/package/c_names.h"
#include "toolchain/cuda_runner.h"
#include "frontend/ir/error.h"
#include "frontend/ir/narrow_types.h"
#include "toolchain/temp_dir.h"

namespace kiln {
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The package's metadata file: the only *.json in the directory. Two packages of different names
// compiled into one directory are refused rather than one picked by directory order.
fs::path metadata_file(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": not a directory (expected a compiled package)");
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") found.push_back(e.path());
  if (found.empty()) throw Error(dir.string() + ": not a kiln package (no <name>.json)");
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    throw Error(dir.string() + ": holds several packages (" + found[0].filename().string() + ", " +
                found[1].filename().string() + "): compile each into a directory of its own");
  }
  return found[0];
}

bool is_c_identifier(const std::string& s) { return !s.empty() && package::c_identifier(s) == s; }

// One input or output entry, checked: its names reach C source and a shell command line, its size
// the runner's buffers.
package::IoInfo parse_io(const nlohmann::json& j, const std::string& where) {
  package::IoInfo info;
  info.name = j.at("name").get<std::string>();
  info.c_name = j.at("c_name").get<std::string>();
  if (!is_c_identifier(info.c_name)) throw Error(where + ": 'c_name' " + info.c_name + " is not a C identifier");
  info.shape = j.at("shape").get<Shape>();
  info.bytes = j.at("bytes").get<int64_t>();
  if (j.contains("count")) {
    info.count = j.at("count").at("output").get<std::string>();
    info.count_axis = j.at("count").at("axis").get<int64_t>();
    if (info.count_axis < 0 || info.count_axis >= static_cast<int64_t>(info.shape.size()))
      throw Error(where + " '" + info.name + "': 'count' axis " + std::to_string(info.count_axis) + " is out of range");
  }
  const std::string dtype = j.at("dtype").get<std::string>();
  info.dtype = DType::Undefined;
  for (int k = 1; k <= 26; ++k)
    if (dtype_name(static_cast<DType>(k)) == dtype) info.dtype = static_cast<DType>(k);
  if (info.dtype == DType::Undefined || !is_supported(info.dtype))
    throw Error(where + ": 'dtype' " + dtype + " is not a dtype kiln packages use");
  uint64_t count = 1;
  for (int64_t d : info.shape)
    if (d < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count) || count > (uint64_t{1} << 60))
      throw Error(where + ": 'shape' " + shape_str(info.shape) + " is not a static shape");
  const uint64_t bytes = static_cast<uint64_t>(storage_bytes(info.dtype, static_cast<int64_t>(count)));
  if (info.bytes < 0 || static_cast<uint64_t>(info.bytes) != bytes)
    throw Error(where + ": 'bytes' " + std::to_string(info.bytes) + " does not match its shape and dtype");
  return info;
}

// A harness in C: reads raw inputs, runs the model `repeat` times, prints the median time, writes raw
// outputs. The library itself needs none of this (no malloc or stdio in the run path). Built with
// -DKILN_RUNNER_THREADS=T: T == 1 calls <m>_run_argv (serial, NULL context); T > 1 calls <m>_run with a
// context whose parallel_for is the package's pthread pool, created once outside the timed loop. With
// -DKILN_RUNNER_CORTEX_M (bare metal, linked with the package's startup file) it counts SysTick ticks
// instead of reading a clock, and prints instructions per run (QEMU with -icount: the ticks converted by
// a loop of known length) and the stack's high-water mark instead of milliseconds.
std::string runner_source(const PackageSignature& sig) {
  const std::string& m = sig.name;
  const size_t ni = sig.inputs.size(), no = sig.outputs.size();
  std::string M = m;
  for (char& c : M) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string sizes = io_sizes_array(sig, "long long");
  // The named structs, filled from the same argument array run_argv takes.
  std::string fill;
  for (size_t i = 0; i < ni; ++i) fill += fmt::format("  in.{} = args[{}];\n", sig.inputs[i].c_name, i);
  for (size_t i = 0; i < no; ++i) fill += fmt::format("  out.{} = args[{}];\n", sig.outputs[i].c_name, ni + i);
  return fmt::format(R"(#define _POSIX_C_SOURCE 199309L
#include "{m}.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if KILN_RUNNER_THREADS > 1
#include "kiln_parallel_pthread.h"
#endif
{sizes}
#ifdef KILN_RUNNER_CORTEX_M
uint64_t kiln_cortex_m_ticks(void);
void kiln_cortex_m_stack_paint(void);
uint32_t kiln_cortex_m_stack_used(void);
/* Two instructions an iteration: the yardstick that turns ticks into instructions. */
static __attribute__((noinline)) void count_down(uint32_t n) {{ __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n)); }}
static double now(void) {{ return (double)kiln_cortex_m_ticks(); }}
#else
static double now(void) {{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}}
#endif
static int cmp(const void* a, const void* b) {{
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}}
int main(int argc, char** argv) {{
  enum {{ NI = {ni}, NO = {no} }};
  if (argc != 2 + NI + NO) {{ fprintf(stderr, "usage: runner REPEAT inputs... outputs...\n"); return 2; }}
  int repeat = atoi(argv[1]);
  void* args[NI + NO + 1];
  for (int i = 0; i < NI + NO; ++i) {{
    args[i] = malloc(sizes[i] ? (size_t)sizes[i] : 1);
    if (!args[i]) {{ fprintf(stderr, "cannot allocate %lld bytes for argument %d\n", sizes[i], i); return 2; }}
    if (i < NI) {{
      FILE* f = fopen(argv[2 + i], "rb");
      if (!f || fread(args[i], 1, (size_t)sizes[i], f) != (size_t)sizes[i]) {{ fprintf(stderr, "cannot read %s\n", argv[2 + i]); return 2; }}
      fclose(f);
    }}
  }}
  size_t ws = {M}_WORKSPACE_SIZE;
  /* Aligned by hand: newlib's aligned_alloc needs a posix_memalign that bare-metal newlib lacks. */
  char* workspace = malloc(ws + {M}_WORKSPACE_ALIGN);
  if (!workspace) {{ fprintf(stderr, "cannot allocate the workspace (%lu bytes)\n", (unsigned long)ws); return 2; }}
  args[NI + NO] = workspace + ({M}_WORKSPACE_ALIGN - (uintptr_t)workspace % {M}_WORKSPACE_ALIGN) % {M}_WORKSPACE_ALIGN;
#if KILN_RUNNER_THREADS > 1
  kiln_pthread_pool* pool = kiln_pthread_pool_create(KILN_RUNNER_THREADS);
  if (!pool) {{ fprintf(stderr, "cannot start %d threads\n", KILN_RUNNER_THREADS); return 2; }}
  {m}_context ctx;
  ctx.parallel_for = kiln_pthread_parallel_for;
  ctx.user = pool;
  {m}_inputs in;
  {m}_outputs out;
{fill}#endif
  double* times = malloc(sizeof(double) * (size_t)(repeat > 0 ? repeat : 1));
#ifdef KILN_RUNNER_CORTEX_M
  kiln_cortex_m_stack_paint();
#endif
  /* One untimed run first: the first touches every page of the weights and the workspace. */
  for (int r = repeat > 0 ? -1 : 0; r < repeat; ++r) {{
    double t0 = now();
#if KILN_RUNNER_THREADS > 1
    int rc = {m}_run(&ctx, &in, &out, args[NI + NO]);
#else
    int rc = {m}_run_argv(args);
#endif
    double t1 = now();
    if (rc != 0) {{ fprintf(stderr, "{m}_run returned %d\n", rc); return 3; }}
    if (r >= 0) times[r] = t1 - t0;
  }}
#if KILN_RUNNER_THREADS > 1
  kiln_pthread_pool_destroy(pool);
#endif
  qsort(times, (size_t)repeat, sizeof(double), cmp);
#ifdef KILN_RUNNER_CORTEX_M
  unsigned long stack = (unsigned long)kiln_cortex_m_stack_used();
  double c0 = now();
  count_down(1u << 20);
  double yardstick = now() - c0;
  if (repeat > 0 && yardstick > 0)
    printf("instructions: %.0f\nmin instructions: %.0f\n", times[repeat / 2] * 2097152.0 / yardstick, times[0] * 2097152.0 / yardstick);
  printf("stack: %lu bytes\n", stack);
#else
  printf("median: %.6f ms\nmin: %.6f ms\n", repeat > 0 ? times[repeat / 2] : 0.0, repeat > 0 ? times[0] : 0.0);
#endif
  for (int i = 0; i < NO; ++i) {{
    FILE* f = fopen(argv[2 + NI + i], "wb");
    if (!f || fwrite(args[NI + i], 1, (size_t)sizes[NI + i], f) != (size_t)sizes[NI + i]) {{ fprintf(stderr, "cannot write\n"); return 2; }}
    fclose(f);
  }}
  return 0;
}}
)",
                     fmt::arg("m", m), fmt::arg("M", M), fmt::arg("sizes", sizes), fmt::arg("ni", ni), fmt::arg("no", no),
                     fmt::arg("fill", fill));
}

// The shell command that runs the runner with `words` (its path, then its arguments). Natively or under
// the run prefix the words follow the prefix; a bare-metal runner is booted by the board emulator the
// prefix names, with the words as its semihosting command line.
std::string runner_command(const CompileTarget& target, const std::string& dir, const std::vector<std::string>& words) {
  std::string cmd;
  if (!target.is_bare_metal()) {
    cmd = target.run_prefix.empty() ? "" : target.run_prefix + " ";
    for (size_t i = 0; i < words.size(); ++i) cmd += (i ? " " : "") + words[i];
    return cmd;
  }
  if (target.run_prefix.empty())
    throw Error(dir + ": the target " + target.name + " names no emulator to run its binaries (run_prefix)");
  // The startup file splits the command line at spaces, and QEMU's option syntax takes ',' as a separator.
  std::string args;
  for (const std::string& w : words) {
    if (w.find_first_of(" ,") != std::string::npos)
      throw Error(dir + ": cannot pass '" + w + "' to a bare-metal runner (a space or ',' in the path; set TMPDIR)");
    args += ",arg=" + w;
  }
  // -icount: the virtual clock advances by instructions, so SysTick counts work done, not host time.
  return target.run_prefix + " -icount shift=0 -display none -monitor none -serial null " +
         "-semihosting-config enable=on,target=native" + args + " -kernel " + words[0];
}

// What a failed compile or link said: its errors (a cross linker's warnings can fill the first lines;
// a program too big for a board's memory is "will not fit in region"), on one line.
std::string compiler_errors(const std::string& log) {
  std::istringstream lines(log);
  std::string line, errors;
  auto has = [&](const char* s) { return line.find(s) != std::string::npos; };
  while (std::getline(lines, line))
    if ((has("error") || has("undefined reference") || has("will not fit") || has("overflowed")) && !has("collect2"))
      errors += (errors.empty() ? "" : " | ") + line;
  std::string text = errors.empty() ? log : errors;
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text.substr(0, 600);
}

int run_command(const std::string& cmd, const fs::path& log) {
  int status = std::system((cmd + " >" + log.string() + " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string io_sizes_array(const PackageSignature& sig, const std::string& c_type) {
  std::string sizes = "static const " + c_type + " sizes[] = {";
  for (const auto& io : sig.inputs) sizes += std::to_string(io.bytes) + ", ";
  for (const auto& io : sig.outputs) sizes += std::to_string(io.bytes) + ", ";
  return sizes + "0};\n";
}

PackageSignature read_package_signature(const std::string& dir) {
  const fs::path file = metadata_file(fs::absolute(dir));
  PackageSignature sig;
  try {
    const nlohmann::json meta = nlohmann::json::parse(slurp(file));
    sig.name = meta.at("name").get<std::string>();
    if (!is_c_identifier(sig.name)) throw Error(file.string() + ": 'name' " + sig.name + " is not a C identifier");
    sig.target = meta.at("target").at("name").get<std::string>();
    sig.target_file = meta.at("target").value("file", std::string());
    for (const auto& j : meta.at("inputs")) sig.inputs.push_back(parse_io(j, file.string() + ": input"));
    for (const auto& j : meta.at("outputs")) sig.outputs.push_back(parse_io(j, file.string() + ": output"));
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's messages name the field or the line and column; the file is ours to name.
    throw Error(file.string() + ": broken package metadata: " + e.what());
  }
  return sig;
}

PackageRun run_package(const std::string& dir, const CompileTarget& target, const std::map<std::string, Tensor>& inputs,
                       int repeat, int threads) {
  if (threads < 1) throw Error("--threads must be at least 1");
  fs::path pkg = fs::absolute(dir);
  const PackageSignature sig = read_package_signature(dir);
  const std::string& m = sig.name;
  TempDir work_dir("kiln-run");
  const fs::path work = work_dir.path();
  {
    std::ofstream(work / "runner.c") << (target.is_cuda() ? cuda_runner_source(sig) : runner_source(sig));
  }
  if (target.is_cuda() && threads > 1) throw Error(dir + ": --threads applies to CPU packages; a CUDA package runs on the GPU");
  std::string static_flag = target.run_prefix.empty() ? "" : " -static";
  // With threads, link the package's pthread pool: the prebuilt object when the package has one (built
  // by the same target compiler), else its source.
  std::string pool;
  if (threads > 1) {
    if (fs::exists(pkg / "kiln_parallel_pthread.o")) pool = " " + (pkg / "kiln_parallel_pthread.o").string() + " -pthread";
    else if (fs::exists(pkg / "kiln_parallel_pthread.c")) pool = " " + (pkg / "kiln_parallel_pthread.c").string() + " -pthread";
    else throw Error(dir + ": --threads needs kiln_parallel_pthread.c in the package (compile it again with this kiln)");
  }
  std::string link = fmt::format("{} -O2 -std=c11 -Wall -Werror=implicit-function-declaration -DKILN_RUNNER_THREADS={}{} -I{} {} {}{} -lm -o {}",
                                 target.cc, threads, static_flag, pkg.string(), (work / "runner.c").string(),
                                 (pkg / ("lib" + m + ".a")).string(), pool, (work / "runner").string());
  if (target.is_bare_metal()) {
    if (threads > 1) throw Error(dir + ": --threads applies to packages for an OS; a bare-metal board runs one thread");
    // newlib with semihosting (rdimon): stdio reaches the host's files through the debugger interface
    // QEMU emulates; the package's startup file and linker script place everything on the board.
    link = fmt::format("{} -O2 -std=c11 -Wall -Werror=implicit-function-declaration -DKILN_RUNNER_THREADS=1 "
                       "-DKILN_RUNNER_CORTEX_M -I{} {} {} {} --specs=rdimon.specs -nostartfiles -T {} "
                       "-Wl,--no-warn-execstack -lm -o {}",
                       target.cc, pkg.string(), (work / "runner.c").string(), (pkg / package::kBoardStartupSource).string(),
                       (pkg / ("lib" + m + ".a")).string(), (pkg / package::kBoardLinkerScript).string(),
                       (work / "runner").string());
  }
  if (target.is_cuda())
    link = fmt::format("{} -O2 -std=c11 -Wall -Werror=implicit-function-declaration -I{} {} {} {} {} -o {}", target.cc,
                       pkg.string(), cuda::cuda_include_flags(), (work / "runner.c").string(),
                       (pkg / ("lib" + m + ".a")).string(), cuda::cuda_link_flags(), (work / "runner").string());
  if (run_command(link, work / "link.log") != 0)
    throw Error(dir + ": cannot link a runner: " + compiler_errors(slurp(work / "link.log")));
  std::vector<std::string> words = {(work / "runner").string(), std::to_string(repeat)};
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const package::IoInfo& io = sig.inputs[i];
    auto it = inputs.find(io.name);
    if (it == inputs.end()) throw Error(dir + ": no value for input '" + io.name + "'");
    if (static_cast<int64_t>(it->second.byte_size()) != io.bytes)
      throw Error(dir + ": input '" + io.name + "' has the wrong size");
    fs::path f = work / ("in" + std::to_string(i) + ".bin");
    std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(it->second.data()),
                                             static_cast<std::streamsize>(it->second.byte_size()));
    words.push_back(f.string());
  }
  for (size_t i = 0; i < sig.outputs.size(); ++i) words.push_back((work / ("out" + std::to_string(i) + ".bin")).string());
  const std::string cmd = runner_command(target, dir, words);
  if (int rc = run_command(cmd, work / "run.log"); rc != 0)
    throw Error(dir + ": the compiled model failed (exit " + std::to_string(rc) + "): " + slurp(work / "run.log").substr(0, 400));
  PackageRun r;
  const std::string log = "\n" + slurp(work / "run.log");  // every "key: value" line starts after a newline
  auto number = [&](const std::string& key) -> std::optional<double> {
    const size_t p = log.find("\n" + key + ": ");
    if (p == std::string::npos) return std::nullopt;
    return std::stod(log.substr(p + key.size() + 3));
  };
  r.median_ms = number("median").value_or(0);
  r.min_ms = number("min").value_or(0);
  r.instructions = number("instructions");
  r.min_instructions = number("min instructions");
  if (auto s = number("stack")) r.stack_bytes = static_cast<int64_t>(*s);
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    const DType dt = sig.outputs[i].dtype;
    const Shape& shape = sig.outputs[i].shape;
    Tensor t(dt, shape);
    std::string bytes = slurp(work / ("out" + std::to_string(i) + ".bin"));
    if (bytes.size() != t.byte_size()) throw Error(dir + ": output " + std::to_string(i) + " has the wrong size");
    std::memcpy(t.data(), bytes.data(), bytes.size());
    r.outputs.push_back(std::move(t));
  }
  return r;
}

void keep_counted_entries(const std::vector<std::string>& names, const std::map<std::string, RunTimeExtent>& counts,
                          std::vector<Tensor>& outs) {
  for (const auto& [name, extent] : counts) {
    const auto at = [&](const std::string& n) {
      const size_t k = static_cast<size_t>(std::find(names.begin(), names.end(), n) - names.begin());
      if (k >= outs.size()) throw Error("output '" + name + "': its count output '" + extent.count + "' is missing");
      return k;
    };
    const size_t k = at(name);
    outs[k] = outs[k].leading(extent.axis, outs[at(extent.count)].get_int(0));
  }
}

}  // namespace kiln
