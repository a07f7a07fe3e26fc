#include "backends/measure/program_builder.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "backends/cuda/cuda_module.h"
#include "backends/llvm/codegen.h"
#include "backends/llvm/emit_object.h"
#include "backends/measure/cuda_candidate.h"
#include "frontend/ir/error.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/bounds_check.h"
#include "scheduler/lower/gpu_task.h"
#include "scheduler/lower/lower_state.h"

extern char** environ;

namespace kiln::measure {
namespace fs = std::filesystem;

namespace {

// The default schedule as a standalone function with lower_state_func's parameter order
// (placeholders, distinct outputs, then everything else), which buffer_specs expects. The body refers
// to buffers, not positions, so reordering the parameters is safe.
lower::LoweredFunc default_schedule_func(const te::ComputeDAG& dag, const std::string& name, const Target& target) {
  lower::LoweredFunc f = lower::lower_dag(dag, name, lower::schedule_params_for(target.vector_bits));
  std::vector<lower::BufferRef> ordered;
  auto take = [&](const te::TensorRef& t) {
    for (lower::BufferRef& b : f.params)
      if (b && b->name == t->name) {
        ordered.push_back(std::move(b));
        b = nullptr;
        return;
      }
  };
  for (const te::TensorRef& t : dag.placeholders) take(t);
  for (const te::TensorRef& t : dag.outputs) take(t);
  for (lower::BufferRef& b : f.params)
    if (b) ordered.push_back(std::move(b));
  f.params = std::move(ordered);
  return f;
}

using Clock = std::chrono::steady_clock;

std::string read_text(const fs::path& p, size_t limit) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() > limit) s = s.substr(0, limit) + "...";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `cc -shared -o so ARGS...` (cc may be several words, e.g. "ccache gcc"); "" on success, else why
// not. For a CPU candidate ARGS are its object and -lm: float64 transcendentals call libm, so the module
// names it as a dependency, and a runner that dlopens it (the RPC server links only libc, libdl and
// pthreads) then loads libm with it. A CUDA candidate's are its C source and the driver API's flags.
std::string link_shared_object(const std::string& cc, const std::vector<std::string>& args, const fs::path& so) {
  std::vector<std::string> words;
  std::istringstream split(cc);
  for (std::string w; split >> w;) words.push_back(w);
  if (words.empty()) return "link: the target names no C compiler (cc)";
  for (const char* a : {"-shared", "-o"}) words.emplace_back(a);
  words.push_back(so.string());
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  const fs::path log = fs::path(so).replace_extension(".link.log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) return "link: cannot run C compiler '" + words[0] + "': " + std::strerror(spawn_error);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string output = read_text(log, 600);
  std::error_code ec;
  fs::remove(log, ec);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && fs::exists(so)) return "";
  std::string how = WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status))
                                      : "killed by signal " + std::to_string(WTERMSIG(status));
  return "link: '" + cc + " -shared' " + how + (output.empty() ? "" : ": " + output);
}

// Writes all of `s` to `fd` (a pipe to the parent); false when the parent has gone.
bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A forked worker building one candidate; the parent reads its JSON result from `fd`.
struct Worker {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  std::string stem;
  std::string output;
  Clock::time_point start;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The worker's process: builds, reports, exits without running the parent's exit handlers.
[[noreturn]] void worker_main(int fd, size_t index, const MeasureInput& input, const Target& target,
                              const std::string& stem, const BuilderOptions& o) {
  std::string json;
  try {
    if (o.in_worker) o.in_worker(index);
    json = to_json(build_candidate(input, target, stem, o.func_name)).dump();
  } catch (...) {
    BuildResult r;
    r.error = MeasureError::Unknown;
    r.error_msg = "build worker: unexpected exception";
    json = to_json(r).dump();
  }
  _exit(write_all(fd, json) ? 0 : 1);
}

// The result of a worker that has exited (its pipe is at EOF) or been killed.
BuildResult collect(Worker& w, bool timed_out, double timeout_s) {
  int status = 0;
  while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
  }
  BuildResult r;
  if (timed_out) {
    r.error = MeasureError::BuildTimeout;
    r.error_msg = "build exceeded the time limit of " + std::to_string(timeout_s) + " s";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    try {
      r = build_result_from_json(nlohmann::json::parse(w.output));
    } catch (const std::exception& e) {
      r = BuildResult{};
      r.error = MeasureError::Unknown;
      r.error_msg = std::string("build worker sent an unreadable result: ") + e.what();
    }
  } else {
    r.error = MeasureError::Unknown;
    r.error_msg = WIFSIGNALED(status) ? "build worker died: " + std::string(strsignal(WTERMSIG(status)))
                                      : "build worker exited with " + std::to_string(WEXITSTATUS(status));
  }
  if (r.error != MeasureError::None) {
    // A killed worker may leave half-written files behind.
    std::error_code ec;
    for (const char* ext : {".o", ".so", ".link.log"}) fs::remove(w.stem + ext, ec);
    r.so_path.clear();
  }
  r.time_s = seconds_since(w.start);
  return r;
}

// A CUDA candidate: the task's GPU program (scheduler/lower/gpu_task.h; the default schedule is the
// state without gpu_tile steps), PTX assembled by ptxas, and a shared object that times it on a GPU
// (cuda_candidate.h). The builder needs the CUDA toolkit, not a GPU.
// `r` names the function; `fail` sets its error and returns it.
BuildResult build_cuda_candidate(const MeasureInput& input, const Target& target, const std::string& stem,
                                 BuildResult& r, const std::function<BuildResult(MeasureError, std::string)>& fail,
                                 Clock::time_point start) {
  const std::string& func_name = r.func_name;
  lower::LoweredFunc func;
  try {
    if (!input.state.valid()) return fail(MeasureError::Instantiation, "lower: empty state");
    func = lower::lower_gpu_task(input.state, func_name, cuda::gpu_schedule_for(target.cores, *target.gpu));
    r.buffers = buffer_specs(func, input.state.dag());
  } catch (const std::exception& e) {
    return fail(MeasureError::Instantiation, std::string("lower: ") + e.what());
  }
  cuda::CudaProgram program;
  try {
    program = cuda::generate_cuda_program(func, llvm_backend::machine_of(target));
  } catch (const std::exception& e) {
    return fail(MeasureError::CompileDevice, std::string("codegen: ") + e.what());
  }
  const fs::path src = stem + ".c", so = stem + ".so";
  {
    std::ofstream out(src, std::ios::binary);
    out << cuda_candidate_source(program, func_name);
    if (!out) return fail(MeasureError::CompileHost, "cannot write " + src.string());
  }
  const std::string link_error = link_shared_object(target.cc, cuda_candidate_flags(src.string()), so);
  std::error_code ec;
  fs::remove(src, ec);
  if (!link_error.empty()) return fail(MeasureError::CompileHost, link_error);
  r.so_path = fs::absolute(so).string();
  r.time_s = seconds_since(start);
  return r;
}

}  // namespace

BuildResult build_candidate(const MeasureInput& input, const Target& target, const std::string& stem,
                            const std::string& func_name) {
  const Clock::time_point start = Clock::now();
  BuildResult r;
  r.func_name = func_name;
  auto fail = [&](MeasureError e, std::string msg) {
    r.error = e;
    r.error_msg = std::move(msg);
    r.time_s = seconds_since(start);
    return r;
  };
  if (target.gpu) return build_cuda_candidate(input, target, stem, r, fail, start);
  // Lowering: the state's own faults.
  lower::LoweredFunc func;
  try {
    if (!input.state.valid()) return fail(MeasureError::Instantiation, "lower: empty state");
    for (const te::TensorRef& t : input.state.dag().tensors)
      if (t->stage && t->stage->is_extern())
        return fail(MeasureError::CompileHost, "runtime kernel " + t->stage->extern_node->op_type +
                                                   " cannot be measured as a standalone function");
    func = input.default_schedule ? default_schedule_func(input.state.dag(), func_name, target)
                                  : lower::lower_state_func(input.state, func_name);
    r.buffers = buffer_specs(func, input.state.dag());
  } catch (const std::exception& e) {
    return fail(MeasureError::Instantiation, std::string("lower: ") + e.what());
  }
  // A program that may leave a buffer (or overflow the stack) is refused, never run.
  try {
    lower::check_bounds(func, lower::lanes_of(target.vector_bits));
  } catch (const lower::BoundsError& e) {
    return fail(MeasureError::Instantiation, std::string("bounds: ") + e.what());
  }
  // Code generation and the object file.
  const fs::path obj = stem + ".o", so = stem + ".so";
  try {
    llvm::LLVMContext ctx;
    llvm::Module mod(func_name, ctx);
    auto tm = llvm_backend::make_target_machine(llvm_backend::machine_of(target));
    llvm_backend::configure_module(mod, *tm);
    llvm_backend::emit_functions({func}, llvm_backend::codegen_options(target.vector_bits, target.features), mod);
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(mod, &os)) return fail(MeasureError::CompileHost, "codegen: invalid LLVM module: " + os.str());
    llvm_backend::emit_object(mod, *tm, obj.string());
  } catch (const std::exception& e) {
    return fail(MeasureError::CompileHost, std::string("codegen: ") + e.what());
  }
  // Linking with the target's compiler driver.
  const std::string link_error = link_shared_object(target.cc, {obj.string(), "-lm"}, so);
  std::error_code ec;
  fs::remove(obj, ec);
  if (!link_error.empty()) return fail(MeasureError::CompileHost, link_error);
  r.so_path = fs::absolute(so).string();
  r.time_s = seconds_since(start);
  return r;
}

ProgramBuilder::ProgramBuilder(Target target, BuilderOptions options)
    : target_(std::move(target)), options_(std::move(options)) {
  // Initialises LLVM's targets before any fork, so workers do not each pay for it, and fails early.
  llvm_backend::make_target_machine(llvm_backend::machine_of(target_));
  if (options_.n_parallel <= 0) options_.n_parallel = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::error_code ec;
  if (options_.build_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "kiln-build-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw Error("builder: cannot create a build directory " + tmpl + ": " + std::strerror(errno));
    dir_ = tmpl;
    owns_dir_ = true;
  } else {
    fs::create_directories(options_.build_dir, ec);
    if (ec) throw Error("builder: cannot create the build directory " + options_.build_dir + ": " + ec.message());
    dir_ = fs::absolute(options_.build_dir).string();
  }
}

ProgramBuilder::~ProgramBuilder() {
  if (!owns_dir_) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::vector<BuildResult> ProgramBuilder::build(const std::vector<MeasureInput>& inputs) {
  std::vector<BuildResult> results(inputs.size());
  const int batch = batch_++;
  // (capped at a day, so deadlines cannot overflow the clock)
  const auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::clamp(options_.timeout_s, 0.0, 86400.0)));
  std::vector<Worker> active;
  size_t next = 0;
  while (next < inputs.size() || !active.empty()) {
    // Start workers up to the limit.
    while (next < inputs.size() && active.size() < static_cast<size_t>(options_.n_parallel)) {
      Worker w;
      w.index = next++;
      w.stem = (fs::path(dir_) / ("p" + std::to_string(getpid()) + "_b" + std::to_string(batch) + "_c" +
                                  std::to_string(w.index)))
                   .string();
      int fds[2];
      if (pipe2(fds, O_CLOEXEC) != 0) {
        results[w.index].error = MeasureError::Unknown;
        results[w.index].error_msg = std::string("builder: pipe: ") + std::strerror(errno);
        continue;
      }
      w.start = Clock::now();
      w.pid = fork();
      if (w.pid == 0) {
        close(fds[0]);
        setpgid(0, 0);  // its own group, so a timeout kills the worker and the compiler it started
        worker_main(fds[1], w.index, inputs[w.index], target_, w.stem, options_);
      }
      close(fds[1]);
      if (w.pid < 0) {
        close(fds[0]);
        results[w.index].error = MeasureError::Unknown;
        results[w.index].error_msg = std::string("builder: fork: ") + std::strerror(errno);
        continue;
      }
      setpgid(w.pid, w.pid);  // also here: whichever of the two runs first, the group exists before a kill
      w.fd = fds[0];
      active.push_back(std::move(w));
    }
    if (active.empty()) continue;
    // Wait for output, an exit or the nearest deadline.
    Clock::time_point nearest = Clock::time_point::max();
    for (const Worker& w : active) nearest = std::min(nearest, w.start + timeout);
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(nearest - Clock::now()).count() + 1;
    std::vector<pollfd> fds;
    for (const Worker& w : active) fds.push_back({w.fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(wait, 0, 60000)));
    if (ready < 0 && errno != EINTR) throw Error(std::string("builder: poll: ") + std::strerror(errno));
    std::vector<Worker> still;
    for (size_t k = 0; k < active.size(); ++k) {
      Worker& w = active[k];
      bool done = false, heard = false;
      if (ready > 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
        heard = true;
        char buf[4096];
        const ssize_t n = read(w.fd, buf, sizeof buf);
        if (n > 0) w.output.append(buf, static_cast<size_t>(n));
        else if (n == 0 || errno != EINTR) done = true;
      }
      // A worker that is still writing its result gets to finish it (the result is a few hundred bytes).
      const bool timed_out = !done && !heard && Clock::now() >= w.start + timeout;
      if (timed_out) {
        kill(-w.pid, SIGKILL);
        kill(w.pid, SIGKILL);
      }
      if (done || timed_out) {
        close(w.fd);
        results[w.index] = collect(w, timed_out, options_.timeout_s);
      } else {
        still.push_back(std::move(w));
      }
    }
    active = std::move(still);
  }
  return results;
}

}  // namespace kiln::measure
