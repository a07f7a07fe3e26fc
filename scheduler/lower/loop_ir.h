/// \file The loop IR: what every schedule lowers to, and the only input of code generation and (later)
/// feature extraction. Statements over flat buffers; expressions are the tensor-expression language
/// with Loads that read a buffer at one flat index.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/te/expr.h"

namespace kiln::lower {

using te::Expr;

/// A flat array of elements. Global buffers are the model's inputs, outputs, weights and workspace
/// tensors; Local ones are allocated by an Allocate statement (accumulators, register tiles).
/// Loads name a buffer through a te::TensorNode of shape {size}, so one expression language serves.
struct ConstantLayout;
/// Where a GPU kernel keeps a local buffer. GpuShared: one copy per block, in shared memory, written
/// and read by all of its threads (a staged tile). GpuPerThread: one copy per thread, allocated
/// outside the block's thread loops so that it lives across them (a register tile that several
/// phases of the block, separated by barriers, update); its indices are within one copy.
enum class BufferScope { Default, GpuShared, GpuPerThread };

struct Buffer {
  std::string name;
  DType dtype;
  int64_t size;
  bool local = false;
  std::shared_ptr<const te::TensorNode> node;  // what Loads refer to
  /// Set when the buffer is a constant of the program stored in another layout (constant_layout.h):
  /// its values follow from the source's when the program is compiled.
  std::shared_ptr<const ConstantLayout> relayout;
  BufferScope scope = BufferScope::Default;
  /// GpuPerThread: the threads of the block. Where threads run one after another (a GPU program on a
  /// CPU) the buffer holds `threads` copies, and the thread loop around an access picks one.
  int64_t threads = 0;
};
using BufferRef = std::shared_ptr<const Buffer>;

/// A constant rewritten into the order its reader's loops walk it. Element i of the rewritten buffer,
/// with i row-major over `extents` (digits d_j, one per loop), holds source[offset + sum_j
/// source_strides[j] * d_j], or 0 where that index falls outside the source (tiles that overshoot).
struct ConstantLayout {
  BufferRef source;
  std::vector<int64_t> extents, source_strides;
  int64_t offset = 0;
};
BufferRef make_buffer(const std::string& name, DType dtype, int64_t size, bool local = false);
/// buffer[index]
Expr load(const BufferRef& b, const Expr& index);

/// GpuBlock and GpuThread loops are bound to CUDA's blockIdx.x and threadIdx.x: a kernel is a
/// GpuBlock loop (its extent the grid) around a GpuThread loop (its extent the block). On a CPU they run
/// as serial loops, one thread after another, which is how GPU programs are checked without a GPU.
enum class ForKind { Serial, Parallel, Vectorized, Unrolled, GpuBlock, GpuThread };
const char* for_kind_name(ForKind k);

enum class StmtKind { For, Store, Allocate, IfThenElse, Block, ExternCall, Prefetch, Barrier };

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

/// One statement. For: `var` from 0 to `extent` (a constant), `body[0]`. Store: buffer[index] = value.
/// Allocate: a local `buffer` live in `body[0]`. IfThenElse: `cond`, then `body[0]`, else `body[1]` (may
/// be null). Block: `body` in order. ExternCall: `callee(args..., int_args...)`, a runtime kernel
/// (runtime/kernels/) for an op that is not a loop nest; a null entry in `args` passes a null pointer
/// (an output the model does not use). Prefetch: a hint that buffer[index] will be read soon, so its
/// cache line is requested now; it never faults and changes no value, so `index` may lie outside the
/// buffer (a micro-kernel's last tile asks for the one after it). Barrier: in a GPU kernel, every thread
/// of the block waits here until all have arrived (__syncthreads); it stands between two thread loops
/// of one block, at a place every thread reaches. Where threads run one after another it does
/// nothing: each thread loop has then finished all threads before the next begins.
///
/// A GpuBlock loop's body may hold several GpuThread loops of one extent (the phases of a block:
/// stage a tile, barrier, compute, barrier), and statements between them that every thread runs
/// alike (the loop over the reduction's chunks, allocations of shared and per-thread buffers).
struct StmtNode {
  StmtKind kind;
  Expr var;
  int64_t extent = 0;
  ForKind for_kind = ForKind::Serial;
  BufferRef buffer;
  Expr index, value, cond;
  std::vector<Stmt> body;
  std::string callee;
  std::vector<BufferRef> args;
  std::vector<int64_t> int_args;
};

Stmt for_loop(const Expr& var, int64_t extent, ForKind kind, Stmt body);
Stmt store(const BufferRef& b, const Expr& index, const Expr& value);
Stmt allocate(const BufferRef& b, Stmt body);
Stmt if_then_else(const Expr& cond, Stmt then_case, Stmt else_case = nullptr);
Stmt block(std::vector<Stmt> stmts);
Stmt extern_call(const std::string& callee, std::vector<BufferRef> args, std::vector<int64_t> int_args);
Stmt prefetch(const BufferRef& b, const Expr& index);
Stmt barrier();

/// `s` with every expression it holds (indices, values, conditions) rewritten by `f`, in all its
/// statements; loop variables themselves stay.
Stmt map_exprs(const Stmt& s, const std::function<Expr(const Expr&)>& f);
/// `s` with the variables of `m` (by node identity) replaced in every expression it holds.
Stmt substitute_stmt(const Stmt& s, const std::map<const te::ExprNode*, Expr>& m);

/// Workspace an extern call needs only while it runs; `stage` is the position (in the DAG's stage
/// order) of the call, so the memory plan can reuse the bytes before and after it.
struct ScratchBuffer {
  BufferRef buffer;
  size_t stage;
};

/// A compiled unit: global buffers it reads and writes (parameters, in this order) and its body.
/// `scratch` lists the parameters that are extern calls' scratch buffers.
struct LoweredFunc {
  std::string name;
  std::vector<BufferRef> params;
  Stmt body;
  std::vector<ScratchBuffer> scratch;
};

/// Prints as indented pseudo-C: `parallel for i0 in 0..64:`, `out[(i0 * 8) + i1] = ...`,
/// `call kiln_rt_topk(x, values, null, scratch; 1, 4, 3)`.
std::string print_stmt(const Stmt& s, int indent = 0);
// With number_statements, each top-level statement is headed `# sN`: the package emits it as the
// function <name>.sN (per-loop profiles name those), and a statement that is itself a block prints
// flat, so counting lines would not find it.
std::string print_func(const LoweredFunc& f, bool number_statements = false);

}  // namespace kiln::lower
