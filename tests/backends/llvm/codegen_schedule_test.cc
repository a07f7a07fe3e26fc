// Code generation of what arbitrary schedules lower to (backends/llvm/codegen.cc): guarded stores in
// vectorized loops (non-divisible splits), local buffers crossing parallel loops, loops and buffers
// nested in vectorized loops, nested parallel loops, strided local buffers, vectorized loops of every
// length (tails of narrower vectors) and strided loads (a wide load and a shuffle). Each loop nest is built by
// hand in the loop IR, compiled for every x86 target this machine runs (AVX-512 masks, AVX2, and SSE2
// where masked access is scalarized), linked into a shared object with the pthread pool, run on real
// data and compared with the same computation in plain C++. Every buffer ends at (or just before) a
// page boundary followed by an inaccessible page, so a masked-off lane reading or writing past the
// end faults.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>

#include "backends/llvm/codegen.h"
#include "backends/llvm/emit_object.h"
#include "backends/llvm/expand_roundeven.h"
#include "frontend/ir/error.h"
#include "scheduler/lower/loop_ir.h"
#include "targets/target.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using lower::BufferRef;
using lower::ForKind;
using lower::LoweredFunc;
using lower::Stmt;
using te::Expr;

// ---- running loop IR --------------------------------------------------------------------------------

// The x86 targets whose code this machine can run.
std::vector<Target> runnable_targets() {
  std::vector<Target> out;
#if defined(__x86_64__)
  __builtin_cpu_init();
  out.push_back(load_target("x86_64-generic"));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) out.push_back(load_target("x86_64-avx2"));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni")) out.push_back(load_target("x86_64-avx2-vnni"));
  const std::string host = host_target_name().value_or("");
  if (host.starts_with("x86_64-avx512")) out.push_back(load_target("x86_64-avx512"));
  if (host == "x86_64-avx512-vnni") out.push_back(load_target("x86_64-avx512-vnni"));
#endif
  return out;
}

// Lanes of a vectorized loop storing `t` (codegen's choice: the vector width over the element size).
int64_t lanes_of(const Target& t, DType d) { return t.vector_bits / 8 / static_cast<int64_t>(dtype_size(d)); }

// The runtime ABI of a compiled function: void f(void* const* buffers, const kiln_parallel* parallel).
using TaskFn = void (*)(void*, int64_t);
struct ParallelHook {
  void (*parallel_for)(void* user, int64_t n, TaskFn fn, void* closure);
  void* user;
};
using KernelFn = void (*)(void* const*, const ParallelHook*);

// Functions compiled for one target and linked (with runtime/kiln_parallel_pthread.c) into a shared
// object by the system C compiler, then loaded with dlopen.
class Compiled {
 public:
  Compiled(const std::vector<LoweredFunc>& funcs, const Target& t) {
    llvm::LLVMContext ctx;
    llvm::Module mod("codegen_schedule_test", ctx);
    auto tm = llvm_backend::make_target_machine(llvm_backend::machine_of(t));
    llvm_backend::configure_module(mod, *tm);
    llvm_backend::emit_functions(funcs, llvm_backend::codegen_options(t.vector_bits, t.features), mod);
    llvm_backend::emit_object(mod, *tm, dir_.path("k.o"));
    const std::string so = dir_.path("k.so");
    const std::string cmd = "cc -shared -fPIC -O2 -pthread -o " + so + " " + dir_.path("k.o") +
                            " " KILN_SOURCE_DIR "/runtime/kiln_parallel_pthread.c -lm";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot link: " + cmd);
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(dlerror());
  }
  ~Compiled() {
    if (handle_) dlclose(handle_);
  }
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;

  template <typename F>
  F symbol(const std::string& name) const {
    void* p = dlsym(handle_, name.c_str());
    if (!p) throw std::runtime_error("no symbol " + name);
    return reinterpret_cast<F>(p);
  }
  KernelFn kernel(const std::string& name) const { return symbol<KernelFn>(name); }

 private:
  testing::TempDir dir_;
  void* handle_ = nullptr;
};

// The LLVM IR of `f` compiled for target `t` (before optimisation), as text.
std::string module_ir(const LoweredFunc& f, const Target& t,
                      const std::vector<std::pair<const lower::Buffer*, const lower::Buffer*>>& same_bytes = {}) {
  llvm::LLVMContext ctx;
  llvm::Module mod("ir", ctx);
  auto tm = llvm_backend::make_target_machine(llvm_backend::machine_of(t));
  llvm_backend::configure_module(mod, *tm);
  llvm_backend::CodegenOptions opts = llvm_backend::codegen_options(t.vector_bits, t.features);
  opts.same_bytes = same_bytes;
  llvm_backend::emit_functions({f}, opts, mod);
  std::string ir;
  llvm::raw_string_ostream os(ir);
  mod.print(os, nullptr);
  return ir;
}

// How many times `what` occurs in `text`.
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The pthread pool of the compiled object, as a parallel hook.
class Pool {
 public:
  Pool(const Compiled& c, int threads) : destroy_(c.symbol<void (*)(void*)>("kiln_pthread_pool_destroy")) {
    pool_ = c.symbol<void* (*)(int)>("kiln_pthread_pool_create")(threads);
    if (!pool_) throw std::runtime_error("cannot create a thread pool");
    hook_ = {c.symbol<decltype(ParallelHook::parallel_for)>("kiln_pthread_parallel_for"), pool_};
  }
  ~Pool() { destroy_(pool_); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  const ParallelHook* hook() const { return &hook_; }

 private:
  void (*destroy_)(void*);
  void* pool_ = nullptr;
  ParallelHook hook_{};
};

// Elements of one dtype (float32, float64 or int64) followed by `slack` bytes and then a page that
// faults on any access. With no slack, a lane past the end faults; with some, masked-off lanes past
// the end stay on the buffer's last page (where codegen uses masked loads and stores rather than
// gathers and scatters), and slack_intact() tells whether anything wrote there.
class GuardedBuffer {
 public:
  GuardedBuffer(DType t, int64_t n, size_t slack) : dtype_(t), n_(n), slack_(slack) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = static_cast<size_t>(n) * dtype_size(t) + slack;
    const size_t span = std::max(page, (bytes + page - 1) / page * page);
    map_size_ = span + page;
    void* m = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<char*>(m);
    if (mprotect(base_ + span, page, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
    data_ = base_ + span - bytes;
    std::memset(base_ + span - slack, kSlackByte, slack);
  }
  ~GuardedBuffer() { munmap(base_, map_size_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  void* data() const { return data_; }
  int64_t size() const { return n_; }
  double get(int64_t i) const {
    switch (dtype_) {
      case DType::Float32: return static_cast<float*>(data_)[i];
      case DType::Float64: return static_cast<double*>(data_)[i];
      default: return static_cast<double>(static_cast<int64_t*>(data_)[i]);
    }
  }
  void set(int64_t i, double v) {
    switch (dtype_) {
      case DType::Float32: static_cast<float*>(data_)[i] = static_cast<float>(v); break;
      case DType::Float64: static_cast<double*>(data_)[i] = v; break;
      default: static_cast<int64_t*>(data_)[i] = static_cast<int64_t>(v); break;
    }
  }
  void fill(const std::function<double(int64_t)>& f) {
    for (int64_t i = 0; i < n_; ++i) set(i, f(i));
  }
  bool slack_intact() const {
    const auto* end = static_cast<const unsigned char*>(data_) + static_cast<size_t>(n_) * dtype_size(dtype_);
    return std::all_of(end, end + slack_, [](unsigned char c) { return c == kSlackByte; });
  }

 private:
  static constexpr unsigned char kSlackByte = 0xa5;
  DType dtype_;
  int64_t n_;
  size_t slack_;
  size_t map_size_ = 0;
  char* base_ = nullptr;
  void* data_ = nullptr;
};

// Buffers in a function's parameter order, allocated by name.
class Buffers {
 public:
  explicit Buffers(const LoweredFunc& f, size_t slack = 0) {
    for (const BufferRef& b : f.params) {
      bufs_[b->name] = std::make_unique<GuardedBuffer>(b->dtype, b->size, slack);
      order_.push_back(bufs_[b->name].get());
    }
  }
  GuardedBuffer& operator[](const std::string& name) { return *bufs_.at(name); }
  bool slack_intact() const {
    return std::all_of(order_.begin(), order_.end(), [](const GuardedBuffer* b) { return b->slack_intact(); });
  }
  void run(KernelFn k, const ParallelHook* hook) {
    std::vector<void*> ptrs;
    for (GuardedBuffer* b : order_) ptrs.push_back(b->data());
    k(ptrs.data(), hook);
  }

 private:
  std::map<std::string, std::unique_ptr<GuardedBuffer>> bufs_;
  std::vector<GuardedBuffer*> order_;
};

// Compares a buffer with the expected values; reports the first few differences.
void expect_equal(const GuardedBuffer& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), static_cast<int64_t>(want.size())) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.size(); ++i)
    if (got.get(i) != want[static_cast<size_t>(i)] && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got.get(i) << ", want " << want[static_cast<size_t>(i)];
  EXPECT_EQ(bad, 0) << what;
}

// ---- loop IR shorthands -----------------------------------------------------------------------------

Expr at(const BufferRef& b, const Expr& index) { return lower::load(b, index); }
Expr imm(int64_t v) { return te::int_imm(v); }
Expr cst(DType t, double v) { return te::const_of(t, v); }
Stmt loop(const Expr& v, int64_t extent, Stmt body) {
  return lower::for_loop(v, extent, ForKind::Serial, std::move(body));
}
Stmt vloop(const Expr& v, int64_t extent, Stmt body) {
  return lower::for_loop(v, extent, ForKind::Vectorized, std::move(body));
}
Stmt ploop(const Expr& v, int64_t extent, Stmt body) {
  return lower::for_loop(v, extent, ForKind::Parallel, std::move(body));
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr double kSentinel = -12345;

// ---- guarded stores in vectorized loops ---------------------------------------------------------------

// A stage over rows x cols whose column axis is split by `factor` (not dividing cols), the inner part
// vectorized: `for i, for j.o, vectorized j.i: if (j < cols) ...` with j = j.o * factor + j.i.
//   C[i * (cols + 3) + j] = f(A[i, j], B[j])       contiguous masked store; C's row gaps hold sentinels
//   T[j * rows + i] = A[i, j]                      non-contiguous: masked scatter
//   if (i != 1):                                   uniform condition: a branch
//     if (j % 3 == 0) D[i, j] = A[i, j] + (j >= 1 ? A[i, j - 1] : 0)    an else branch, a select
//     else if (A[i, j] > 0) D[i, j] = B[j] else D[i, j] = -B[j]         nested, condition reads memory
// In the last row, masked-off lanes index past the ends of A, B, C, D and T.
struct GuardedSplit {
  int64_t rows, cols, factor;
  DType t;
  LoweredFunc func;

  GuardedSplit(const std::string& name, DType dtype, int64_t rows_, int64_t cols_, int64_t factor_)
      : rows(rows_), cols(cols_), factor(factor_), t(dtype) {
    const int64_t stride = cols + 3;
    BufferRef A = lower::make_buffer("A", t, rows * cols), B = lower::make_buffer("B", t, cols);
    BufferRef C = lower::make_buffer("C", t, (rows - 1) * stride + cols), T = lower::make_buffer("T", t, rows * cols);
    BufferRef D = lower::make_buffer("D", t, rows * cols);
    Expr i = te::var("i"), jo = te::var("j.o"), ji = te::var("j.i");
    Expr j = jo * factor + ji;
    Expr a = at(A, i * cols + j), b = at(B, j);
    Expr f = is_float(t) ? a * cst(t, 2) + b : a / b + b * cst(t, 3);  // int64: a masked-off divisor must stay defined
    Stmt d_branches = lower::if_then_else(
        te::eq(te::floormod(j, imm(3)), imm(0)),
        lower::store(D, i * cols + j, a + te::select(j >= imm(1), at(A, i * cols + j - 1), cst(t, 0))),
        lower::if_then_else(a > cst(t, 0), lower::store(D, i * cols + j, b), lower::store(D, i * cols + j, -b)));
    Stmt guarded = lower::if_then_else(
        j < imm(cols), lower::block({lower::store(C, i * stride + j, f), lower::store(T, j * rows + i, a),
                                     lower::if_then_else(te::binary(te::ExprOp::Ne, i, imm(1)), d_branches)}));
    func = {name, {A, B, C, T, D}, loop(i, rows, loop(jo, ceil_div(cols, factor), vloop(ji, factor, guarded))), {}};
  }

  // `slack` bytes after every buffer (see GuardedBuffer).
  void check(KernelFn k, size_t slack) const {
    Buffers bufs(func, slack);
    bufs["A"].fill([&](int64_t x) { return static_cast<double>((x * 7) % 23) - 11; });
    bufs["B"].fill([&](int64_t x) { return static_cast<double>(x % 5) + 1; });
    for (const char* out : {"C", "T", "D"}) bufs[out].fill([](int64_t) { return kSentinel; });
    bufs.run(k, nullptr);
    const int64_t stride = cols + 3;
    std::vector<double> c(static_cast<size_t>((rows - 1) * stride + cols), kSentinel);
    std::vector<double> tt(static_cast<size_t>(rows * cols)), d(static_cast<size_t>(rows * cols), kSentinel);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double a = bufs["A"].get(i * cols + j), b = bufs["B"].get(j);
        c[static_cast<size_t>(i * stride + j)] =
            is_float(t) ? a * 2 + b : static_cast<double>(static_cast<int64_t>(a) / static_cast<int64_t>(b)) + b * 3;
        tt[static_cast<size_t>(j * rows + i)] = a;
        if (i == 1) continue;
        double& dv = d[static_cast<size_t>(i * cols + j)];
        if (j % 3 == 0)
          dv = a + (j >= 1 ? bufs["A"].get(i * cols + j - 1) : 0);
        else
          dv = a > 0 ? b : -b;
      }
    std::string what = func.name + " (cols " + std::to_string(cols) + ", factor " + std::to_string(factor) +
                       ", slack " + std::to_string(slack) + ") ";
    EXPECT_TRUE(bufs.slack_intact()) << what << "wrote past a buffer's end";
    expect_equal(bufs["C"], c, what + "C");
    expect_equal(bufs["T"], tt, what + "T");
    expect_equal(bufs["D"], d, what + "D");
  }
};

// Every remainder of cols by the vector width, with the split factor equal to the width (one
// straight-line vector per j.o) and 5 widths + 3 (a vector loop plus a scalar tail per j.o); the
// buffers end at a page boundary (edges: gathers and scatters) or 24 bytes before one (masked loads
// and stores).
void check_guarded_splits(DType t) {
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    const int64_t lanes = lanes_of(target, t);
    std::vector<GuardedSplit> cases;
    for (int64_t r = 0; r < lanes; ++r)
      for (int64_t factor : {lanes, 5 * lanes + 3})
        cases.emplace_back("split_" + std::to_string(r) + "_" + std::to_string(factor), t, 3, 7 * lanes + r, factor);
    std::vector<LoweredFunc> funcs;
    for (const GuardedSplit& c : cases) funcs.push_back(c.func);
    Compiled compiled(funcs, target);
    for (const GuardedSplit& c : cases)
      for (size_t slack : {size_t{0}, size_t{24}}) c.check(compiled.kernel(c.func.name), slack);
  }
}

// AArch64 NEON has no masked loads and stores: LLVM expands them lane by lane. The same loop nests
// must compile there (this machine cannot run them; conformance runs packages under QEMU).
TEST(CodegenSchedule, GuardedVectorStoresCompileForAArch64) {
  Target target = load_target("aarch64-cortex-a72");
  std::vector<LoweredFunc> funcs;
  for (DType t : {DType::Float32, DType::Int64}) {
    const int64_t lanes = lanes_of(target, t);
    funcs.push_back(GuardedSplit("split_" + dtype_name(t), t, 3, 7 * lanes + 1, lanes).func);
  }
  llvm::LLVMContext ctx;
  llvm::Module mod("aarch64", ctx);
  auto tm = llvm_backend::make_target_machine(llvm_backend::machine_of(target));
  llvm_backend::configure_module(mod, *tm);
  llvm_backend::emit_functions(funcs, {target.vector_bits}, mod);
  testing::TempDir dir;
  llvm_backend::emit_object(mod, *tm, dir.path("k.o"));
  EXPECT_TRUE(std::filesystem::file_size(dir.path("k.o")) > 0);
}

// A runtime-kernel call has no vector form: inside a vectorized loop (masked or not) it is an error
// that names the loop nest's problem, not a crash.
TEST(CodegenSchedule, ExternCallUnderVectorMaskIsAnError) {
  BufferRef x = lower::make_buffer("x", DType::Float32, 64);
  Expr j = te::var("j");
  LoweredFunc f{
      "bad", {x}, vloop(j, 64, lower::if_then_else(j < imm(10), lower::extern_call("kiln_rt_topk", {x}, {1}))), {}};
  llvm::LLVMContext ctx;
  llvm::Module mod("bad", ctx);
  try {
    llvm_backend::emit_functions({f}, {512}, mod);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extern call inside a vectorized loop"), std::string::npos) << e.what();
  }
}

TEST(CodegenSchedule, GuardedVectorStoresFloat32) { check_guarded_splits(DType::Float32); }
TEST(CodegenSchedule, GuardedVectorStoresFloat64) { check_guarded_splits(DType::Float64); }
TEST(CodegenSchedule, GuardedVectorStoresInt64) { check_guarded_splits(DType::Int64); }

// A cache-write tile (Ansor's C.local) under a non-divisible split: the accumulators live in a local
// buffer and only the write-back is guarded (B's rows are padded to whole tiles). The tile's indices
// stay inside it in every lane, so its loads under the mask are plain (SROA keeps the tile in
// registers); only the global store is masked.
LoweredFunc guarded_tile(int64_t lanes, int64_t rows, int64_t cols, int64_t depth) {
  const int64_t padded = ceil_div(cols, lanes) * lanes;
  BufferRef A = lower::make_buffer("A", DType::Float32, rows * depth);
  BufferRef B = lower::make_buffer("B", DType::Float32, depth * padded);
  BufferRef C = lower::make_buffer("C", DType::Float32, rows * cols);
  BufferRef tile = lower::make_buffer("C.local", DType::Float32, lanes, true);
  Expr i = te::var("i"), jo = te::var("j.o"), ji = te::var("j.i"), k = te::var("k");
  Expr j = jo * lanes + ji;
  Expr b = at(B, k * padded + j);
  Stmt body = lower::allocate(
      tile, lower::block(
                {vloop(ji, lanes, lower::store(tile, ji, cst(DType::Float32, 0))),
                 loop(k, depth, vloop(ji, lanes, lower::store(tile, ji, at(tile, ji) + at(A, i * depth + k) * b))),
                 vloop(ji, lanes, lower::if_then_else(j < imm(cols), lower::store(C, i * cols + j, at(tile, ji))))}));
  return {"tile", {A, B, C}, ploop(i, rows, loop(jo, ceil_div(cols, lanes), body)), {}};
}

TEST(CodegenSchedule, GuardedTileWriteBackMasksOnlyTheGlobalStore) {
  const int64_t lanes = 16, rows = 5, cols = 37, depth = 6, padded = ceil_div(cols, lanes) * lanes;
  LoweredFunc f = guarded_tile(lanes, rows, cols, depth);
  const std::string ir = module_ir(f, load_target("x86_64-avx512"));
  EXPECT_NE(ir.find("@llvm.masked.store"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("@llvm.masked.load"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("@llvm.masked.gather"), std::string::npos) << ir;

  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    if (lanes_of(target, DType::Float32) != lanes) continue;  // the tile is one vector wide
    Compiled compiled({f}, target);
    Buffers bufs(f);
    bufs["A"].fill([](int64_t x) { return static_cast<double>(x % 7) - 3; });
    bufs["B"].fill([](int64_t x) { return static_cast<double>(x % 5) - 2; });
    bufs["C"].fill([](int64_t) { return kSentinel; });
    Pool pool(compiled, 3);
    bufs.run(compiled.kernel("tile"), pool.hook());
    std::vector<double> want(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double s = 0;
        for (int64_t k = 0; k < depth; ++k) s += bufs["A"].get(i * depth + k) * bufs["B"].get(k * padded + j);
        want[static_cast<size_t>(i * cols + j)] = s;
      }
    expect_equal(bufs["C"], want, "tile C");
  }
}

// A target's fused_multiply_add decides whether C = A*B + C rounds once or twice. With A = B = 1 + 2^-12
// and C = -(1 + 2^-11), the exact product 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 in float, so a separate
// multiply and add give 0 and a fused one gives 2^-24, in the vector body and in the scalar tail alike.
TEST(CodegenSchedule, FusedMultiplyAddFollowsTheTarget) {
  const int64_t n = 37;
  BufferRef A = lower::make_buffer("A", DType::Float32, n);
  BufferRef B = lower::make_buffer("B", DType::Float32, n);
  BufferRef C = lower::make_buffer("C", DType::Float32, n);
  Expr i = te::var("i");
  Stmt body = vloop(i, n, lower::store(C, i, at(A, i) * at(B, i) + at(C, i)));
  LoweredFunc f{"axpy", {A, B, C}, body, {}};
  const double a = 1.0 + std::ldexp(1.0, -12);
  int checked = 0;
  for (Target target : runnable_targets()) {
    if (target.features.find("+fma") == std::string::npos) continue;  // no FMA instruction to choose
    for (bool fused : {false, true}) {
      SCOPED_TRACE(target.name + (fused ? " fused" : " separate"));
      target.fused_multiply_add = fused;
      Compiled compiled({f}, target);
      Buffers bufs(f);
      bufs["A"].fill([&](int64_t) { return a; });
      bufs["B"].fill([&](int64_t) { return a; });
      bufs["C"].fill([](int64_t) { return -(1.0 + std::ldexp(1.0, -11)); });
      Pool pool(compiled, 1);
      bufs.run(compiled.kernel("axpy"), pool.hook());
      expect_equal(bufs["C"], std::vector<double>(n, fused ? std::ldexp(1.0, -24) : 0.0), "C");
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no target with FMA";
}

// Prefetches are hints: one past the end of a buffer (into the inaccessible page after it, as a
// micro-kernel's last tile asks for the tile after it) neither faults nor changes a value, in a
// serial loop and in a parallel task; the module calls llvm.prefetch.
TEST(CodegenSchedule, PrefetchPastTheBufferNeverFaults) {
  const int64_t n = 64;
  BufferRef A = lower::make_buffer("A", DType::Float32, n);
  BufferRef C = lower::make_buffer("C", DType::Float32, n);
  Expr i = te::var("i"), j = te::var("j");
  Stmt body = lower::block({lower::prefetch(A, i * 16 + imm(n)), lower::store(C, i, at(A, i) * cst(DType::Float32, 2))});
  LoweredFunc f{"twice", {A, C}, lower::block({loop(i, n, body), ploop(j, 4, lower::prefetch(A, j * 4096 + imm(n)))}), {}};
  const std::string ir = module_ir(f, load_target("x86_64-generic"));
  EXPECT_NE(ir.find("@llvm.prefetch"), std::string::npos) << ir;
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    Compiled compiled({f}, target);
    Buffers bufs(f);
    bufs["A"].fill([](int64_t x) { return static_cast<double>(x) - 7; });
    Pool pool(compiled, 2);
    bufs.run(compiled.kernel("twice"), pool.hook());
    std::vector<double> want(n);
    for (int64_t x = 0; x < n; ++x) want[static_cast<size_t>(x)] = 2.0 * (static_cast<double>(x) - 7);
    expect_equal(bufs["C"], want, "C");
  }
}

// ---- parallel loops -----------------------------------------------------------------------------------

// Local buffers crossing parallel loops: `w` is written before the first parallel loop and read in
// it; `t` is written by the tasks at disjoint places (its last vector per row under a mask) and read
// across rows by the tasks of the second loop.
//   allocate w[cols]: for j: w[j] = B[j] * 3
//   allocate t[rows * cols]:
//     parallel for i: for j.o, vectorized j.i: if (j < cols) t[i, j] = A[i, j] + w[j]
//     parallel for i: vectorized for j: C[i, j] = t[i, j] * 2 + t[(i + 1) % rows, j]
LoweredFunc locals_across_parallel(int64_t lanes, int64_t rows, int64_t cols) {
  const DType f32 = DType::Float32;
  BufferRef A = lower::make_buffer("A", f32, rows * cols), B = lower::make_buffer("B", f32, cols);
  BufferRef C = lower::make_buffer("C", f32, rows * cols);
  BufferRef w = lower::make_buffer("w", f32, cols, true), t = lower::make_buffer("t", f32, rows * cols, true);
  Expr i = te::var("i"), j = te::var("j"), jo = te::var("j.o"), ji = te::var("j.i");
  Expr js = jo * lanes + ji;
  Stmt fill_t = ploop(i, rows,
                      loop(jo, ceil_div(cols, lanes),
                           vloop(ji, lanes,
                                 lower::if_then_else(js < imm(cols), lower::store(t, i * cols + js,
                                                                                  at(A, i * cols + js) + at(w, js))))));
  Stmt use_t =
      ploop(i, rows,
            vloop(j, cols,
                  lower::store(C, i * cols + j,
                               at(t, i * cols + j) * cst(f32, 2) + at(t, te::floormod(i + 1, imm(rows)) * cols + j))));
  Stmt body = lower::allocate(w, lower::block({loop(j, cols, lower::store(w, j, at(B, j) * cst(f32, 3))),
                                               lower::allocate(t, lower::block({fill_t, use_t}))}));
  return {"locals", {A, B, C}, body, {}};
}

// Nested parallel loops (the inner one runs serially inside the outer task) around a per-task
// accumulator: C = A (rows x depth) * B (depth x cols).
LoweredFunc nested_parallel(int64_t rows, int64_t cols, int64_t depth) {
  const DType f32 = DType::Float32;
  BufferRef A = lower::make_buffer("A", f32, rows * depth), B = lower::make_buffer("B", f32, depth * cols);
  BufferRef C = lower::make_buffer("C", f32, rows * cols), acc = lower::make_buffer("acc", f32, 1, true);
  Expr i = te::var("i"), j = te::var("j"), k = te::var("k");
  Expr a = at(acc, imm(0));
  Stmt dot = lower::allocate(
      acc, lower::block({lower::store(acc, imm(0), cst(f32, 0)),
                         loop(k, depth, lower::store(acc, imm(0), a + at(A, i * depth + k) * at(B, k * cols + j))),
                         lower::store(C, i * cols + j, a)}));
  return {"nested", {A, B, C}, ploop(i, rows, ploop(j, cols, dot)), {}};
}

TEST(CodegenSchedule, LocalBuffersCrossParallelLoops) {
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    const int64_t lanes = lanes_of(target, DType::Float32), rows = 37, cols = 3 * lanes + 5;
    LoweredFunc f = locals_across_parallel(lanes, rows, cols);
    Compiled compiled({f}, target);
    Pool pool(compiled, 4);
    const ParallelHook no_hook{nullptr, nullptr};
    for (const ParallelHook* hook : {static_cast<const ParallelHook*>(nullptr), &no_hook, pool.hook()}) {
      Buffers bufs(f);
      bufs["A"].fill([](int64_t x) { return static_cast<double>(x % 11) - 5; });
      bufs["B"].fill([](int64_t x) { return static_cast<double>(x % 4); });
      bufs.run(compiled.kernel("locals"), hook);
      std::vector<double> t(static_cast<size_t>(rows * cols)), c(t.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          t[static_cast<size_t>(i * cols + j)] = bufs["A"].get(i * cols + j) + bufs["B"].get(j) * 3;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          c[static_cast<size_t>(i * cols + j)] =
              t[static_cast<size_t>(i * cols + j)] * 2 + t[static_cast<size_t>(((i + 1) % rows) * cols + j)];
      expect_equal(bufs["C"], c, hook == pool.hook() ? "C with the pool" : "C serial");
    }
  }
}

TEST(CodegenSchedule, NestedParallelLoopsWithPerTaskBuffer) {
  const int64_t rows = 13, cols = 29, depth = 17;
  LoweredFunc f = nested_parallel(rows, cols, depth);
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    Compiled compiled({f}, target);
    Pool pool(compiled, 4);
    for (const ParallelHook* hook : {static_cast<const ParallelHook*>(nullptr), pool.hook()}) {
      Buffers bufs(f);
      bufs["A"].fill([](int64_t x) { return static_cast<double>(x % 9) - 4; });
      bufs["B"].fill([](int64_t x) { return static_cast<double>(x % 7) - 3; });
      bufs.run(compiled.kernel("nested"), hook);
      std::vector<double> want(static_cast<size_t>(rows * cols));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          double s = 0;
          for (int64_t k = 0; k < depth; ++k) s += bufs["A"].get(i * depth + k) * bufs["B"].get(k * cols + j);
          want[static_cast<size_t>(i * cols + j)] = s;
        }
      expect_equal(bufs["C"], want, hook ? "C with the pool" : "C serial");
    }
  }
}

// ---- loops and buffers inside vectorized loops ------------------------------------------------------

// Over j in 0..cols, vectorized (cols a multiple of the width: straight-line vectors; or not: a
// vector loop and a scalar tail):
//   C[j] = 0; for k: C[j] = C[j] + A[k, j] * B[k]                 a serial loop inside
//   allocate acc[1]: acc = 0; for k: acc = acc + A[k, j] * B[k]; D[j] = acc * 2     lane-private
//   allocate tmp[4]: for k < 4: tmp[k] = A[k, j]                  lane-private, indexed by j:
//     if (j % 2 == 0) tmp[0] = -1                                   masked uniform store
//     E[j] = tmp[j % 4] + tmp[0] * 10                               gather from the lanes' copies
//   unrolled for k < 20: F[k] = A[k] * 3                            longer than the full unroll limit
LoweredFunc inside_vector_loops(const std::string& name, int64_t cols, int64_t depth) {
  const DType f32 = DType::Float32;
  BufferRef A = lower::make_buffer("A", f32, depth * cols), B = lower::make_buffer("B", f32, depth);
  BufferRef C = lower::make_buffer("C", f32, cols), D = lower::make_buffer("D", f32, cols);
  BufferRef E = lower::make_buffer("E", f32, cols), F = lower::make_buffer("F", f32, 20);
  BufferRef acc = lower::make_buffer("acc", f32, 1, true), tmp = lower::make_buffer("tmp", f32, 4, true);
  Expr j = te::var("j"), k = te::var("k");
  Expr jmod4 = te::floormod(j, imm(4));
  Stmt c = vloop(j, cols,
                 lower::block({lower::store(C, j, cst(f32, 0)),
                               loop(k, depth, lower::store(C, j, at(C, j) + at(A, k * cols + j) * at(B, k)))}));
  Stmt d = vloop(
      j, cols,
      lower::allocate(
          acc,
          lower::block({lower::store(acc, imm(0), cst(f32, 0)),
                        loop(k, depth, lower::store(acc, imm(0), at(acc, imm(0)) + at(A, k * cols + j) * at(B, k))),
                        lower::store(D, j, at(acc, imm(0)) * cst(f32, 2))})));
  Stmt e =
      vloop(j, cols,
            lower::allocate(tmp, lower::block({loop(k, 4, lower::store(tmp, k, at(A, k * cols + j))),
                                               lower::if_then_else(te::eq(te::floormod(j, imm(2)), imm(0)),
                                                                   lower::store(tmp, imm(0), cst(f32, -1))),
                                               lower::store(E, j, at(tmp, jmod4) + at(tmp, imm(0)) * cst(f32, 10))})));
  Stmt f = lower::for_loop(k, 20, ForKind::Unrolled, lower::store(F, k, at(A, k) * cst(f32, 3)));
  return {name, {A, B, C, D, E, F}, lower::block({c, d, e, f}), {}};
}

TEST(CodegenSchedule, LoopsAndBuffersInsideVectorizedLoops) {
  const int64_t depth = 6;
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    const int64_t lanes = lanes_of(target, DType::Float32);
    std::vector<LoweredFunc> funcs = {inside_vector_loops("whole", 2 * lanes, depth),
                                      inside_vector_loops("tail", 5 * lanes + 3, depth)};
    Compiled compiled(funcs, target);
    for (const LoweredFunc& f : funcs) {
      const int64_t cols = f.params[2]->size;
      Buffers bufs(f);
      bufs["A"].fill([](int64_t x) { return static_cast<double>(x % 13) - 6; });
      bufs["B"].fill([](int64_t x) { return static_cast<double>(x) + 1; });
      bufs.run(compiled.kernel(f.name), nullptr);
      std::vector<double> c(static_cast<size_t>(cols)), d(c.size()), e(c.size()), fv(20);
      for (int64_t j = 0; j < cols; ++j) {
        double s = 0;
        for (int64_t k = 0; k < depth; ++k) s += bufs["A"].get(k * cols + j) * bufs["B"].get(k);
        c[static_cast<size_t>(j)] = s;
        d[static_cast<size_t>(j)] = s * 2;
        double tmp[4];
        for (int64_t k = 0; k < 4; ++k) tmp[k] = bufs["A"].get(k * cols + j);
        if (j % 2 == 0) tmp[0] = -1;
        e[static_cast<size_t>(j)] = tmp[j % 4] + tmp[0] * 10;
      }
      for (int64_t k = 0; k < 20; ++k) fv[static_cast<size_t>(k)] = bufs["A"].get(k) * 3;
      expect_equal(bufs["C"], c, f.name + " C");
      expect_equal(bufs["D"], d, f.name + " D");
      expect_equal(bufs["E"], e, f.name + " E");
      expect_equal(bufs["F"], fv, f.name + " F");
    }
  }
}

// A local buffer indexed by the vector variable with a stride: interleave A and B into t (stride-2
// stores, one of them masked), then read t back contiguously, with a stride and non-affinely.
//   vectorized for j < n: t[2j] = A[j]; vectorized for j < n: t[2j + 1] = B[j]
//   vectorized for j < n: if (j % 3 == 0) t[2j] = 0
//   vectorized for j < 2n: C[j] = t[j]
//   vectorized for j < n: D[j] = t[2j + 1] * 2 + t[j / 2]
LoweredFunc strided_local(int64_t n) {
  const DType f32 = DType::Float32;
  BufferRef A = lower::make_buffer("A", f32, n), B = lower::make_buffer("B", f32, n);
  BufferRef C = lower::make_buffer("C", f32, 2 * n), D = lower::make_buffer("D", f32, n);
  BufferRef t = lower::make_buffer("t", f32, 2 * n, true);
  Expr j = te::var("j");
  return {
      "strided",
      {A, B, C, D},
      lower::allocate(
          t,
          lower::block(
              {vloop(j, n, lower::store(t, j * 2, at(A, j))), vloop(j, n, lower::store(t, j * 2 + 1, at(B, j))),
               vloop(j, n,
                     lower::if_then_else(te::eq(te::floormod(j, imm(3)), imm(0)), lower::store(t, j * 2, cst(f32, 0)))),
               vloop(j, 2 * n, lower::store(C, j, at(t, j))),
               vloop(j, n, lower::store(D, j, at(t, j * 2 + 1) * cst(f32, 2) + at(t, te::floordiv(j, imm(2)))))})),
      {}};
}

TEST(CodegenSchedule, StridedLocalBufferInVectorizedLoops) {
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    const int64_t lanes = lanes_of(target, DType::Float32);
    for (int64_t n : {2 * lanes, 3 * lanes + 1}) {
      LoweredFunc f = strided_local(n);
      Compiled compiled({f}, target);
      Buffers bufs(f);
      bufs["A"].fill([](int64_t x) { return static_cast<double>(x) + 1; });
      bufs["B"].fill([](int64_t x) { return -static_cast<double>(x) - 1; });
      bufs.run(compiled.kernel("strided"), nullptr);
      std::vector<double> t(static_cast<size_t>(2 * n)), d(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        t[static_cast<size_t>(2 * j)] = j % 3 == 0 ? 0 : bufs["A"].get(j);
        t[static_cast<size_t>(2 * j + 1)] = bufs["B"].get(j);
      }
      for (int64_t j = 0; j < n; ++j)
        d[static_cast<size_t>(j)] = t[static_cast<size_t>(2 * j + 1)] * 2 + t[static_cast<size_t>(j / 2)];
      expect_equal(bufs["C"], t, "C, n " + std::to_string(n));
      expect_equal(bufs["D"], d, "D, n " + std::to_string(n));
    }
  }
}

// Every extent from 1 to three vectors and a bit: whole vectors, then the tail as narrower vectors
// and a scalar; a local accumulator row updated in a reduction loop (a register tile's row); loads
// with strides 2 and 3 whose wide load would run past the end of S on the last vector (S ends at a
// faulting page), so the code must fall back to a gather there.
//   vectorized for j < n: acc[j] = 0
//   for r < 3: vectorized for j < n: acc[j] = acc[j] + A[j + r] * S[2j + r] + S[3j]
//   vectorized for j < n: C[j] = acc[j]
LoweredFunc tails_and_strides(int64_t n) {
  const DType f32 = DType::Float32;
  BufferRef A = lower::make_buffer("A", f32, n + 2), S = lower::make_buffer("S", f32, std::max(2 * n + 1, 3 * n - 2));
  BufferRef C = lower::make_buffer("C", f32, n), acc = lower::make_buffer("acc", f32, n, true);
  Expr j = te::var("j"), r = te::var("r");
  Stmt update = lower::store(acc, j, at(acc, j) + at(A, j + r) * at(S, j * 2 + r) + at(S, j * 3));
  return {"tails",
          {A, S, C},
          lower::allocate(acc, lower::block({vloop(j, n, lower::store(acc, j, cst(f32, 0))),
                                             lower::for_loop(r, 3, ForKind::Serial, vloop(j, n, update)),
                                             vloop(j, n, lower::store(C, j, at(acc, j)))})),
          {}};
}

TEST(CodegenSchedule, VectorizedLoopsOfEveryLengthAndStridedLoads) {
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    const int64_t lanes = lanes_of(target, DType::Float32);
    for (int64_t n = 1; n <= 3 * lanes + 3; ++n) {
      LoweredFunc f = tails_and_strides(n);
      Compiled compiled({f}, target);
      Buffers bufs(f);
      bufs["A"].fill([](int64_t x) { return static_cast<double>(x % 7) - 3; });
      bufs["S"].fill([](int64_t x) { return static_cast<double>(x % 5) + 0.5; });
      bufs.run(compiled.kernel("tails"), nullptr);
      std::vector<double> c(static_cast<size_t>(n), 0.0);
      for (int64_t rr = 0; rr < 3; ++rr)
        for (int64_t jj = 0; jj < n; ++jj)
          c[static_cast<size_t>(jj)] += bufs["A"].get(jj + rr) * bufs["S"].get(2 * jj + rr) + bufs["S"].get(3 * jj);
      expect_equal(bufs["C"], c, "C, n " + std::to_string(n));
    }
  }
}

// A function of many statements calls them from functions of 256 calls each (compile time: one block
// of thousands of calls is slow to schedule), in order: 700 statements, each A[k % 7] = A[k % 7] * 2 +
// k, reproduce the serial result (3 chunks, the last one partial).
TEST(CodegenSchedule, ManyStatementsRunInOrderThroughChunks) {
  const Target target = runnable_targets().front();
  BufferRef A = lower::make_buffer("A", DType::Float64, 7);
  std::vector<Stmt> body;
  for (int64_t k = 0; k < 700; ++k)
    body.push_back(lower::store(A, imm(k % 7), lower::load(A, imm(k % 7)) * cst(DType::Float64, 2) + cst(DType::Float64, static_cast<double>(k))));
  LoweredFunc f{"many", {A}, lower::block(std::move(body)), {}};
  Compiled compiled({f}, target);
  Buffers bufs(f);
  bufs["A"].fill([](int64_t x) { return static_cast<double>(x); });
  bufs.run(compiled.kernel("many"), nullptr);
  std::vector<double> want(7);
  for (int64_t x = 0; x < 7; ++x) want[static_cast<size_t>(x)] = static_cast<double>(x);
  for (int64_t k = 0; k < 700; ++k) want[static_cast<size_t>(k % 7)] = want[static_cast<size_t>(k % 7)] * 2 + static_cast<double>(k);
  expect_equal(bufs["A"], want, "A");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// ---- four-byte dot products -------------------------------------------------------------------------

// C[i] = C[i] + dot4_u8s8(A[i], B[i]) (with `signed_a`, dot4_s8s8) over `n` int32 lanes, vectorized.
LoweredFunc dot4_accumulate(int64_t n, bool signed_a = false) {
  BufferRef A = lower::make_buffer("A", DType::Int32, n), B = lower::make_buffer("B", DType::Int32, n),
            C = lower::make_buffer("C", DType::Int32, n);
  Expr i = te::var("i");
  const Expr dot = signed_a ? te::dot4_s8s8(at(A, i), at(B, i)) : te::dot4_u8s8(at(A, i), at(B, i));
  return {"dot4", {A, B, C}, vloop(i, n, lower::store(C, i, at(C, i) + dot)), {}};
}

// What the instruction computes, lane by lane: bytes of a unsigned (`signed_a`: signed) times bytes
// of b signed.
int32_t dot4_of(uint32_t a, uint32_t b, int32_t acc, bool signed_a = false) {
  int64_t sum = acc;
  for (int j = 0; j < 4; ++j) {
    const auto a_byte = static_cast<uint8_t>((a >> (8 * j)) & 0xff);
    sum += (signed_a ? static_cast<int8_t>(a_byte) : a_byte) * static_cast<int64_t>(static_cast<int8_t>((b >> (8 * j)) & 0xff));
  }
  return static_cast<int32_t>(static_cast<uint32_t>(sum));
}

// Lanes of random words and the extreme bytes (0, 255 / -128, 127, and an accumulator that wraps).
struct Dot4Lanes {
  std::vector<uint32_t> a, b, c;
  explicit Dot4Lanes(int64_t n) : a(static_cast<size_t>(n)), b(a.size()), c(a.size()) {
    uint32_t state = 12345;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = next();
      b[i] = next();
      c[i] = next();
    }
    a[0] = 0xffffffffu, b[0] = 0x80808080u;  // 255 (or -1) * -128, four times
    a[1] = 0xffffffffu, b[1] = 0x7f7f7f7fu;  // 255 (or -1) * 127
    c[2] = 0x7fffffffu, a[2] = 0x01010101u, b[2] = 0x01010101u;  // wraps past INT32_MAX
    a[3] = 0x80808080u, b[3] = 0x80808080u;  // -128 * -128 (or 128 * -128)
  }
  // Runs `f` (dot4_accumulate) compiled for `target` on these lanes and checks every one.
  void check(const LoweredFunc& f, const Target& target, bool signed_a) const {
    Compiled compiled({f}, target);
    Buffers bufs(f);
    auto* pa = static_cast<uint32_t*>(bufs["A"].data());
    auto* pb = static_cast<uint32_t*>(bufs["B"].data());
    auto* pc = static_cast<uint32_t*>(bufs["C"].data());
    std::copy(a.begin(), a.end(), pa);
    std::copy(b.begin(), b.end(), pb);
    std::copy(c.begin(), c.end(), pc);
    bufs.run(compiled.kernel("dot4"), nullptr);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(static_cast<int32_t>(pc[i]), dot4_of(a[i], b[i], static_cast<int32_t>(c[i]), signed_a)) << "lane " << i;
  }
};

// A target with AVX512-VNNI computes acc + dot4 as one vpdpbusd; one without expands it into byte
// multiplies. Both give the instruction's lanes exactly, extreme bytes (0, 255 / -128, 127) and an
// accumulator that wraps included, on every x86 target this machine runs (a 16-lane body, an 8-lane
// and a 4-lane tail: vpdpbusd has all three widths).
TEST(CodegenSchedule, Dot4IsOneVpdpbusdWhereTheTargetHasItAndExactEverywhere) {
  const int64_t n = 16 + 8 + 4 + 1;
  LoweredFunc f = dot4_accumulate(n);
  const std::string vnni = module_ir(f, load_target("x86_64-avx512-vnni"));
  EXPECT_NE(vnni.find("@llvm.x86.avx512.vpdpbusd.512"), std::string::npos) << vnni;
  EXPECT_NE(vnni.find("@llvm.x86.avx512.vpdpbusd.256"), std::string::npos) << vnni;
  EXPECT_NE(vnni.find("@llvm.x86.avx512.vpdpbusd.128"), std::string::npos) << vnni;
  EXPECT_EQ(module_ir(f, load_target("x86_64-avx512")).find("vpdpbusd"), std::string::npos);
  const std::string avx_vnni = module_ir(f, load_target("x86_64-avx2-vnni"));  // 256 bits: 8 and 4 lanes
  EXPECT_NE(avx_vnni.find("@llvm.x86.avx512.vpdpbusd.256"), std::string::npos) << avx_vnni;
  EXPECT_EQ(avx_vnni.find("@llvm.x86.avx512.vpdpbusd.512"), std::string::npos) << avx_vnni;

  const Dot4Lanes lanes(n);
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    lanes.check(f, target, false);
  }
}

// A row of 13 (squeezenet's 13 x 13 maps, vectorized along the row) is one 16-lane vpdpbusd with
// three lanes unused, not byte multiplies lane by lane; the same integers.
TEST(CodegenSchedule, Dot4OfAnOddWidthIsTheNextWiderVpdpbusd) {
  for (const int64_t n : {13, 7, 3}) {
    SCOPED_TRACE(n);
    LoweredFunc f = dot4_accumulate(n);
    const std::string vnni = module_ir(f, load_target("x86_64-avx512-vnni"));
    EXPECT_NE(vnni.find("@llvm.x86.avx512.vpdpbusd."), std::string::npos) << vnni;
    EXPECT_EQ(vnni.find("mul <"), std::string::npos) << vnni;  // no lane-by-lane byte products
    const Dot4Lanes lanes(n);
    for (const Target& target : runnable_targets()) {
      SCOPED_TRACE(target.name);
      lanes.check(f, target, false);
    }
  }
}

// The signed-by-signed form is one sdot per 4 lanes on AArch64 with +dotprod (neoverse-n1) and
// none without (cortex-a72, and x86); exact on every target this machine runs (there, the
// expansion; the sdot path runs bit-exact against ONNX Runtime under qemu-aarch64:
// ctest ort.zoo.aarch64-neoverse-n1.*).
TEST(CodegenSchedule, Dot4S8S8IsOneSdotWhereTheTargetHasItAndExactEverywhere) {
  const int64_t n = 16 + 8 + 4 + 1;
  LoweredFunc f = dot4_accumulate(n, true);
  const std::string n1 = module_ir(f, load_target("aarch64-neoverse-n1"));
  EXPECT_NE(n1.find("@llvm.aarch64.neon.sdot.v4i32.v16i8"), std::string::npos) << n1;
  EXPECT_EQ(module_ir(f, load_target("aarch64-cortex-a72")).find("sdot"), std::string::npos);
  EXPECT_EQ(module_ir(f, load_target("x86_64-avx512-vnni")).find("vpdpbusd"), std::string::npos);
  const Dot4Lanes lanes(n);
  for (const Target& target : runnable_targets()) {
    SCOPED_TRACE(target.name);
    lanes.check(f, target, true);
  }
}

// On a Cortex-M with the DSP extension each dot4 is two SMLADs of byte pairs: UXTB16 for the
// unsigned side of Dot4U8S8, SXTB16 for signed bytes. Exact against ONNX Runtime on QEMU's M4 and M7
// (ctest ort.zoo.cortex-m{4,7}.{qmatmul,ds_cnn_int8,ds_cnn_qdq}: every byte value of both sides).
TEST(CodegenSchedule, Dot4IsTwoSmladsOnACortexMWithTheDspExtension) {
  const Target m4 = load_target("cortex-m4");
  ASSERT_NE(m4.features.find("+dsp"), std::string::npos);
  const std::string u8s8 = module_ir(dot4_accumulate(7), m4);
  EXPECT_EQ(count_of(u8s8, "call i32 @llvm.arm.smlad("), 2) << u8s8;
  EXPECT_EQ(count_of(u8s8, "call i32 @llvm.arm.uxtb16("), 2) << u8s8;
  EXPECT_EQ(count_of(u8s8, "call i32 @llvm.arm.sxtb16("), 2) << u8s8;
  const std::string s8s8 = module_ir(dot4_accumulate(7, true), load_target("cortex-m7"));
  EXPECT_EQ(count_of(s8s8, "call i32 @llvm.arm.smlad("), 2) << s8s8;
  EXPECT_EQ(count_of(s8s8, "call i32 @llvm.arm.sxtb16("), 4) << s8s8;
  EXPECT_EQ(module_ir(dot4_accumulate(7), load_target("x86_64-generic")).find("smlad"), std::string::npos);
}

// Every load and store through a parameter buffer names that buffer's alias scope and none of the
// others' (codegen.cc, mark_distinct_buffers): a store to C then cannot change M[0], whose load LLVM
// may keep in a register across the loop (DS-CNN on the M7: 6.52 -> 5.90 million instructions).
TEST(CodegenSchedule, BuffersAreDistinctAliasScopes) {
  const int64_t n = 64;
  BufferRef A = lower::make_buffer("A", DType::Float32, n), M = lower::make_buffer("M", DType::Float32, 1),
            C = lower::make_buffer("C", DType::Int8, n);
  Expr i = te::var("i");
  LoweredFunc f{"scale", {A, M, C}, loop(i, n, lower::store(C, i, te::cast(DType::Int8, at(A, i) * at(M, imm(0))))), {}};
  for (const char* name : {"cortex-m4", "x86_64-avx512"}) {
    const std::string ir = module_ir(f, load_target(name));
    EXPECT_EQ(count_of(ir, "!alias.scope !"), 3) << name << "\n" << ir;  // the loads of A and M, the store to C
    EXPECT_EQ(count_of(ir, "!noalias !"), 3) << name << "\n" << ir;
    EXPECT_NE(ir.find("distinct !{!"), std::string::npos) << name << ": scopes of their own\n" << ir;
  }
}

// A buffer written in place over another (same_bytes) is one alias scope with it: LLVM must then keep
// each load of A before the store to C that may overwrite it. M stays a scope of its own.
TEST(CodegenSchedule, BuffersWrittenInPlaceShareOneAliasScope) {
  const int64_t n = 64;
  BufferRef A = lower::make_buffer("A", DType::Float32, n), M = lower::make_buffer("M", DType::Float32, 1),
            C = lower::make_buffer("C", DType::Float32, n);
  Expr i = te::var("i");
  LoweredFunc f{"scale", {A, M, C}, loop(i, n, lower::store(C, i, at(A, i) * at(M, imm(0)))), {}};
  const std::string apart = module_ir(f, load_target("x86_64-generic"));
  const std::string joined = module_ir(f, load_target("x86_64-generic"), {{A.get(), C.get()}});
  EXPECT_EQ(count_of(apart, "!\"A\"}"), 1) << apart;
  EXPECT_EQ(count_of(apart, "!\"C\"}"), 1) << apart;
  EXPECT_EQ(count_of(joined, "!\"A\"}"), 1) << joined;  // the scope is named for the buffer read
  EXPECT_EQ(count_of(joined, "!\"C\"}"), 0) << joined;
  EXPECT_EQ(count_of(joined, "!alias.scope !"), 3) << joined;  // still marked: M is apart from both
}

// The int8 requantization (round, add the zero point, clamp, cast) is VCVTR, a saturating add and
// a clamp SSAT can take on 32-bit Arm with a VFP (backends/llvm/requantize.h); AArch64, which
// names its FPU +fp-armv8 too, and x86 keep the float code. Exactness on every edge case:
// RequantizeVcvtr.CompiledPackagesPrintTheReferencesIntegersOnEveryEdge.
TEST(CodegenSchedule, RequantizationIsVcvtrAndSaturatingIntegersOnA32BitArmCore) {
  const int64_t n = 9;
  BufferRef A = lower::make_buffer("A", DType::Float32, n), Z = lower::make_buffer("Z", DType::Int8, 1),
            C = lower::make_buffer("C", DType::Int8, n);
  Expr i = te::var("i");
  const Expr v = te::unary(te::ExprOp::Round, at(A, i)) + te::cast(DType::Float32, at(Z, imm(0)));
  const Expr q = te::cast(DType::Int8, te::min(te::max(v, te::float_imm(-128)), te::float_imm(127)));
  LoweredFunc f{"requantize", {A, Z, C}, vloop(i, n, lower::store(C, i, q)), {}};
  for (const char* name : {"cortex-m4", "cortex-m7"}) {
    const std::string ir = module_ir(f, load_target(name));
    EXPECT_NE(ir.find("@llvm.arm.vcvtr.f32("), std::string::npos) << name << "\n" << ir;
    EXPECT_NE(ir.find("@llvm.sadd.sat.i32("), std::string::npos) << name << "\n" << ir;
    EXPECT_EQ(ir.find("roundeven"), std::string::npos) << name << "\n" << ir;
  }
  for (const char* name : {"aarch64-cortex-a72", "x86_64-generic"}) {
    const std::string ir = module_ir(f, load_target(name));
    EXPECT_EQ(ir.find("vcvtr"), std::string::npos) << name << "\n" << ir;
    EXPECT_NE(ir.find("roundeven"), std::string::npos) << name << "\n" << ir;
  }
}

// On a 32-bit core without vectors (Cortex-M4, M7) loop variables and index arithmetic are 32-bit,
// sign-extended to 64 only where a variable is a value (here, stored as a float); 64-bit targets
// keep 64-bit indices. Exactness there: every node test compiled and run on QEMU's M4
// (ctest conformance.onnx_node.cortex_m4) and the models on the M7 (conformance.models.cortex_m7).
TEST(CodegenSchedule, IndicesAre32BitOnA32BitCoreWithoutVectors) {
  const int64_t n = 30;
  BufferRef A = lower::make_buffer("A", DType::Float32, n), C = lower::make_buffer("C", DType::Float32, n);
  Expr i = te::var("i"), j = te::var("j");
  // C[5i + j] = A[clamp-free neighbour: j > 0 ? 5i + j - 1 : 5i] + float(j)
  Expr at_left = te::select(te::binary(te::ExprOp::Gt, j, imm(0)), i * imm(5) + j - imm(1), i * imm(5));
  LoweredFunc f{"rows", {A, C},
                loop(i, 6, loop(j, 5, lower::store(C, i * imm(5) + j, at(A, at_left) + te::cast(DType::Float32, j)))), {}};
  for (const char* name : {"cortex-m4", "cortex-m7"}) {
    const std::string ir = module_ir(f, load_target(name));
    EXPECT_NE(ir.find("phi i32"), std::string::npos) << name << "\n" << ir;
    EXPECT_EQ(ir.find("phi i64"), std::string::npos) << name << "\n" << ir;
    EXPECT_EQ(ir.find("mul i64"), std::string::npos) << name << "\n" << ir;
    EXPECT_NE(ir.find("sext i32"), std::string::npos) << name << ": j as a value\n" << ir;
  }
  for (const char* name : {"x86_64-generic", "aarch64-cortex-a72"}) {
    const std::string ir = module_ir(f, load_target(name));
    EXPECT_NE(ir.find("phi i64"), std::string::npos) << name << "\n" << ir;
    EXPECT_EQ(ir.find("phi i32"), std::string::npos) << name << "\n" << ir;
  }
}

// Round-half-to-even where the target has no rounding instruction (x86-64 without SSE4.1, the
// Cortex-M4) is float arithmetic, not a libm call per element; on the M7 it is nearbyint (VRINTR);
// with one (AVX2, AArch64) it stays the instruction. Every kind of value rounds exactly as the C library's nearbyint in the
// default mode: ties both ways, the sign of a zero result, the last values below 2^23 (2^52) where
// the sum's rounding matters, larger ones, infinities, NaN and subnormals.
TEST(CodegenSchedule, RoundToEvenWithoutAnInstructionIsArithmeticAndExact) {
  const std::vector<double> values{0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.4, 0.0, -0.0, 0.49999997, 3.5000002, 8388607.5,
                                   -8388606.5, 8388608.0, 8388609.0, 4194303.5, 4194304.5, -4194305.5, 16777217.0,
                                   4503599627370495.5, -4503599627370494.5, 4503599627370497.0, 1e30, -1e30,
                                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(), 1e-40, -1e-40, 1e-310, -1e-310, 123.456, -7.5};
  const int64_t n = static_cast<int64_t>(values.size());
  for (DType t : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(t));
    BufferRef A = lower::make_buffer("A", t, n), C = lower::make_buffer("C", t, n);
    Expr i = te::var("i");
    LoweredFunc f{"round", {A, C}, vloop(i, n, lower::store(C, i, te::unary(te::ExprOp::Round, at(A, i)))), {}};
    // Which targets expand it: the pass reports how many calls it replaced.
    auto expanded = [&](const std::string& name) {
      const Target target = load_target(name);
      llvm::LLVMContext ctx;
      llvm::Module mod("round", ctx);
      auto tm = llvm_backend::make_target_machine(llvm_backend::machine_of(target));
      llvm_backend::configure_module(mod, *tm);
      llvm_backend::emit_functions({f}, llvm_backend::codegen_options(target.vector_bits, target.features), mod);
      return llvm_backend::expand_roundeven_without_instruction(mod, *tm);
    };
    EXPECT_GT(expanded("x86_64-generic"), 0);
    EXPECT_EQ(expanded("x86_64-avx2"), 0);
    EXPECT_EQ(expanded("aarch64-cortex-a72"), 0);
    // The M4's FPU is single precision: its doubles are library calls, additions included. The M7
    // rounds both in the current mode in one instruction (nearbyint, VRINTR).
    if (t == DType::Float32) EXPECT_GT(expanded("cortex-m4"), 0);
    else EXPECT_EQ(expanded("cortex-m4"), 0);
    EXPECT_GT(expanded("cortex-m7"), 0);
    for (const Target& target : runnable_targets()) {
      SCOPED_TRACE(target.name);
      Compiled compiled({f}, target);
      Buffers bufs(f);
      for (int64_t k = 0; k < n; ++k) bufs["A"].set(k, values[static_cast<size_t>(k)]);
      bufs.run(compiled.kernel("round"), nullptr);
      for (int64_t k = 0; k < n; ++k) {
        const double v = values[static_cast<size_t>(k)];
        if (t == DType::Float32) {
          const float want = std::nearbyint(static_cast<float>(v));
          const float got = static_cast<const float*>(bufs["C"].data())[k];
          if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << v;
          else EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "value " << v << " gave " << got;
        } else {
          const double want = std::nearbyint(v);
          const double got = static_cast<const double*>(bufs["C"].data())[k];
          if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << v;
          else EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << "value " << v << " gave " << got;
        }
      }
    }
  }
}


// ---- float to narrow integers -----------------------------------------------------------------------

// What a cast from float to a type of at most 32 bits computes (scheduler/te, as ONNX): the value
// converted to int64 with saturation (NaN -> 0), its low 32 bits.
int32_t low_bits_of_saturated(double v) {
  int64_t w = 0;
  if (std::isnan(v)) w = 0;
  else if (v >= 9223372036854775808.0) w = INT64_MAX;
  else if (v < -9223372036854775808.0) w = INT64_MIN;
  else w = static_cast<int64_t>(v);
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(w)));
}

// Vectors of float32 and float64 converted to int32 (one vector conversion when every lane is
// small), with every case of the int64 saturation: NaN, infinities, values past 2^63 and 2^31,
// negative non-integers past -2^31, plain values. The large ones share vectors with small ones, so
// the vector and scalar code take both paths.
TEST(CodegenSchedule, FloatToNarrowIntegerCastsWrapTheSaturatedInt64InVectors) {
  const std::vector<double> values{0.0, -0.0, 1.9, -1.9, 127.5, -128.5, 2147483647.0, 2147483648.0, -2147483648.0,
                                   -2147483649.5, 3e9, -3e9, 4294967296.0 + 12345, 1099511627776.0 + 7, -1099511627776.0 - 7,
                                   9.2233720368547e18, 9223372036854775808.0, 1e20, -9223372036854775808.0, -1e20,
                                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(), 65535.75, -65536.25};
  // Small values only: every vector takes the one-conversion path.
  const std::vector<double> small{0.0, -0.0, 1.9, -1.9, 127.5, -128.5, 255.99, -2147483520.0, 2147483520.0, 3.5, -7.25,
                                  1e9, -1e9, 65535.75, -65536.25, 42.0, -42.5, 0.5, -0.5, 100.0, -100.0, 8.75, -8.75, 1.0, -1.0};
  ASSERT_EQ(small.size(), values.size());
  const int64_t n = static_cast<int64_t>(values.size());
  for (const std::vector<double>* set : {&values, &small}) {
    for (DType from : {DType::Float32, DType::Float64}) {
      SCOPED_TRACE(dtype_name(from));
      BufferRef A = lower::make_buffer("A", from, n), C = lower::make_buffer("C", DType::Int32, n);
      Expr i = te::var("i");
      LoweredFunc f{"to_int", {A, C}, vloop(i, n, lower::store(C, i, te::cast(DType::Int32, at(A, i)))), {}};
      const std::string ir = module_ir(f, load_target("x86_64-avx512"));
      const std::string lanes16 = from == DType::Float32 ? "<16 x float>" : "<16 x double>";
      EXPECT_NE(ir.find("fptosi " + lanes16), std::string::npos) << "no vector conversion for small values\n" << ir;
      for (const Target& target : runnable_targets()) {
        SCOPED_TRACE(target.name);
        Compiled compiled({f}, target);
        Buffers bufs(f);
        for (int64_t k = 0; k < n; ++k) bufs["A"].set(k, (*set)[static_cast<size_t>(k)]);
        bufs.run(compiled.kernel("to_int"), nullptr);
        const auto* got = static_cast<const int32_t*>(bufs["C"].data());
        for (int64_t k = 0; k < n; ++k) {
          const double v = from == DType::Float32 ? static_cast<double>(static_cast<float>((*set)[static_cast<size_t>(k)]))
                                                  : (*set)[static_cast<size_t>(k)];
          EXPECT_EQ(got[k], low_bits_of_saturated(v)) << "value " << v;
        }
      }
    }
  }
}
}  // namespace
}  // namespace kiln
