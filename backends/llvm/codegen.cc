#include "backends/llvm/codegen.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsARM.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Verifier.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <map>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "backends/llvm/expr_ops.h"
#include "backends/llvm/index_analysis.h"
#include "backends/llvm/requantize.h"
#include "frontend/ir/error.h"
#include "scheduler/te/compute.h"
#include "targets/target.h"

namespace kiln::llvm_backend {

using lower::Buffer;
using lower::ForKind;
using lower::Stmt;
using lower::StmtKind;
using te::Expr;
using te::ExprNode;
using te::ExprOp;

llvm::StructType* parallel_struct_type(llvm::LLVMContext& ctx) {
  auto* ptr = llvm::PointerType::get(ctx, 0);
  return llvm::StructType::get(ctx, {ptr, ptr});
}

namespace {

// The largest stride along the vector axis read by a wide load and a shuffle rather than a gather:
// convolutions and pooling windows stride by 2 (sometimes 3 or 4); beyond that the wide load reads
// mostly elements it throws away.
constexpr int64_t kMaxShuffledStride = 4;

// Whether the module is for 32-bit Arm (arm*, thumb*: a Cortex-M), which AArch64 is not.
bool is_32bit_arm(const llvm::Module& m) {
  const llvm::Triple t(m.getTargetTriple());
  return t.isARM() || t.isThumb();
}

// The function's parameters by buffer and by tensor, built once and shared by the functions of its
// statements and their parallel tasks: each rebuilding them made a 5000-MatMul chain's codegen
// quadratic in its buffers.
struct ParamMaps {
  std::unordered_map<const Buffer*, size_t> index;
  std::unordered_map<const te::TensorNode*, const Buffer*> by_node;
};

class FuncEmitter {
 public:
  FuncEmitter(llvm::Module& m, const CodegenOptions& opts, const std::vector<lower::BufferRef>& params,
              std::shared_ptr<const ParamMaps> maps = nullptr)
      : m_(m), ctx_(m.getContext()), b_(ctx_), opts_(opts), params_(params), maps_(std::move(maps)) {}

  llvm::Function* emit(const lower::LoweredFunc& f) {
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, f.name, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    name_ = f.name;
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    buffers_arg_ = fn_->getArg(0);
    parallel_arg_ = fn_->getArg(1);
    if (f.body && f.body->kind == StmtKind::Block && f.body->body.size() > 1) {
      // One function per top-level statement (one per stage): the optimiser's cost grows faster than
      // linearly with function size, and a model has thousands of stages.
      // The calls themselves go in functions of kCallsPerChunk when there are many: the code
      // generator's scheduling of one block of thousands of calls is superlinear too.
      constexpr size_t kCallsPerChunk = 256;
      const size_t n = f.body->body.size();
      llvm::IRBuilder<> caller(entry);
      llvm::Function* chunk = fn_;
      bind_params();
      for (size_t i = 0; i < n; ++i) {
        if (n > 2 * kCallsPerChunk && i % kCallsPerChunk == 0) {
          if (chunk != fn_) caller.CreateRetVoid();
          chunk = llvm::Function::Create(fty, llvm::Function::InternalLinkage, f.name + ".c" + std::to_string(i / kCallsPerChunk), m_);
          chunk->addFnAttr(llvm::Attribute::NoUnwind);
          chunk->addFnAttr(llvm::Attribute::NoInline);
          b_.CreateCall(chunk, {buffers_arg_, parallel_arg_});
          caller.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", chunk));
        }
        lower::LoweredFunc part{f.name + ".s" + std::to_string(i), f.params, f.body->body[i], {}};
        FuncEmitter sub(m_, opts_, params_, maps_);
        llvm::Function* pf = sub.emit(part);
        pf->setLinkage(llvm::GlobalValue::InternalLinkage);
        pf->addFnAttr(llvm::Attribute::NoInline);
        caller.CreateCall(pf, {chunk->getArg(0), chunk->getArg(1)});
      }
      if (chunk != fn_) caller.CreateRetVoid();
      b_.CreateRetVoid();
      return fn_;
    }
    bind_params();
    emit_stmt(f.body);
    b_.CreateRetVoid();
    mark_distinct_buffers();
    return fn_;
  }

  /// A CUDA kernel `void NAME(void* const* buffers)` running `body`, whose GpuBlock and GpuThread loops
  /// read blockIdx.x and threadIdx.x instead of looping.
  llvm::Function* emit_kernel(const std::string& name, const Stmt& body) {
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addParamAttr(0, llvm::Attribute::NoAlias);
    name_ = name;
    gpu_kernel_ = true;
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    buffers_arg_ = fn_->getArg(0);
    parallel_arg_ = llvm::ConstantPointerNull::get(ptr);
    bind_params();
    emit_stmt(body);
    b_.CreateRetVoid();
    return fn_;
  }

 private:
  // ---- types -------------------------------------------------------------------------------------
  llvm::Type* mem_type(DType t) { return memory_type(ctx_, t); }
  llvm::Type* scalar_type(DType t) { return value_type(ctx_, t); }
  llvm::Type* val_type(DType t) {
    llvm::Type* s = scalar_type(t);
    return vec_var_ ? llvm::VectorType::get(s, static_cast<unsigned>(lanes_), false) : s;
  }
  int lanes_for(DType t) const {
    size_t bytes = dtype_size(t);
    if (t == DType::Float16 || t == DType::BFloat16 || t == DType::Bool) bytes = 4;
    return std::max(1, static_cast<int>(opts_.vector_bits / 8 / static_cast<int>(bytes)));
  }

  llvm::Value* splat(llvm::Value* v) {
    if (!vec_var_ || v->getType()->isVectorTy()) return v;
    return b_.CreateVectorSplat(static_cast<unsigned>(lanes_), v);
  }

  // ---- index width -------------------------------------------------------------------------------
  // On a 32-bit core without vectors (a Cortex-M) the loop variables and the arithmetic of scalar
  // load and store indices are 32-bit, elsewhere 64-bit (te's Int64). In 64 bits every index add,
  // compare and clamp took two or more instructions there, and the clamps of guarded loads many more
  // (docs/cortex-m.md). 32 bits hold every index: a buffer on such a core has fewer than 2^31
  // elements, and so has each partial sum of the affine forms lowering builds (a padded position
  // one row or column outside is a small negative number). An index read from data (Gather's) is
  // truncated; one past 2^31 is out of bounds anyway, and the clamp still keeps the load inside its
  // buffer. As data (Range's values, a cast), a variable is sign-extended back to 64 bits.
  bool narrow_index() const { return m_.getDataLayout().getPointerSizeInBits(0) == 32 && opts_.vector_bits <= 32; }
  llvm::Value* index_const(int64_t v) {
    return llvm::ConstantInt::get(narrow_index() ? b_.getInt32Ty() : b_.getInt64Ty(), static_cast<uint64_t>(v));
  }
  llvm::Value* as_i64(llvm::Value* v) {
    return v->getType()->isIntegerTy(32) ? b_.CreateSExt(v, b_.getInt64Ty()) : v;
  }
  llvm::Value* as_index(llvm::Value* v) {
    return narrow_index() && v->getType()->isIntegerTy(64) ? b_.CreateTrunc(v, b_.getInt32Ty()) : v;
  }
  // A scalar access's index (see "index width").
  llvm::Value* emit_index(const Expr& index) {
    if (!narrow_index() || vec_var_) return emit_expr(index, false);
    return as_index(emit_narrow(index));
  }
  llvm::Value* emit_narrow(const Expr& expr) {
    const ExprNode* e = expr.get();
    if (e->dtype == DType::Int64) switch (e->op) {
        case ExprOp::IntImm:
          if (e->int_value >= INT32_MIN && e->int_value <= INT32_MAX) return index_const(e->int_value);
          break;
        case ExprOp::Var:
          if (auto it = vars_.find(e); it != vars_.end()) return as_index(it->second);
          break;
        case ExprOp::Add:
        case ExprOp::Sub:
        case ExprOp::Mul:
        case ExprOp::Div:
        case ExprOp::Mod:
        case ExprOp::FloorDiv:
        case ExprOp::FloorMod:
        case ExprOp::Min:
        case ExprOp::Max:
          return emit_binary_op(b_, e->op, DType::Int64, as_index(emit_narrow(e->args[0])), as_index(emit_narrow(e->args[1])));
        case ExprOp::Select:
          return b_.CreateSelect(emit_narrow_condition(e->args[0]), as_index(emit_narrow(e->args[1])),
                                 as_index(emit_narrow(e->args[2])));
        default: break;
      }
    return emit_expr(expr, false);
  }
  // A condition of an index: comparisons of indices in 32 bits, through and/or.
  llvm::Value* emit_narrow_condition(const Expr& cond) {
    const ExprNode* e = cond.get();
    if (te::is_comparison(e->op) && e->args[0]->dtype == DType::Int64)
      return emit_binary_op(b_, e->op, DType::Int64, as_index(emit_narrow(e->args[0])), as_index(emit_narrow(e->args[1])));
    if ((e->op == ExprOp::And || e->op == ExprOp::Or) && e->dtype == DType::Bool)
      return emit_binary_op(b_, e->op, DType::Bool, emit_narrow_condition(e->args[0]), emit_narrow_condition(e->args[1]));
    return emit_expr(cond, false);
  }

  // ---- buffers -----------------------------------------------------------------------------------
  // Global buffers are bound lazily: a stage touches a few of a model's thousands of tensors.
  void bind_params() {
    if (maps_) return;
    auto maps = std::make_shared<ParamMaps>();
    for (size_t i = 0; i < params_.size(); ++i) {
      maps->index[params_[i].get()] = i;
      maps->by_node[params_[i]->node.get()] = params_[i].get();
    }
    maps_ = std::move(maps);
  }

  llvm::Value* base_of(const Buffer* buf) {
    auto it = base_.find(buf);
    if (it != base_.end()) return it->second;
    auto pi = maps_->index.find(buf);
    if (pi == maps_->index.end()) throw InternalError("codegen: buffer '" + buf->name + "' is not bound in " + name_);
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    // At the top of the entry block, or right after the buffer array is loaded (task functions).
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().getFirstInsertionPt());
    if (auto* def = llvm::dyn_cast<llvm::Instruction>(buffers_arg_)) entry.SetInsertPoint(def->getNextNode());
    llvm::Value* slot = entry.CreateConstGEP1_64(ptr, buffers_arg_, pi->second);
    // In a kernel every buffer is in global memory: read as an addrspace(1) pointer and cast to a
    // generic one, NVPTX's address-space inference turns the loads and stores into global ones.
    llvm::Value* p = gpu_kernel_ ? entry.CreateAddrSpaceCast(entry.CreateLoad(llvm::PointerType::get(ctx_, 1), slot, buf->name), ptr)
                                 : entry.CreateLoad(ptr, slot, buf->name);
    base_[buf] = p;
    return p;
  }

  // Tells LLVM that the buffers this function reads and writes do not overlap: each parameter buffer
  // gets an alias scope, and every load and store through its base pointer says it touches that
  // scope and none of the others. True by construction: workspace buffers share bytes only when
  // their live ranges (statements, and a function is one statement) do not overlap or one is written
  // in place over the other (those two are one scope: opts_.same_bytes), weights are
  // their own memory, a view (an in-place Concat's input, a Slice) is read or written beside the
  // other views only where their bytes are disjoint, and the caller's inputs and outputs must not
  // overlap (the package header says so). Without it an int8 store could change any float, so every
  // per-channel multiplier, zero point and offset was loaded again for each output (DS-CNN on the
  // M4: bench/RESULTS.md).
  void mark_distinct_buffers() {
    if (gpu_kernel_) return;
    std::vector<std::pair<const Buffer*, llvm::Value*>> globals;
    for (const auto& [buf, p] : base_)
      if (!buf->local) globals.emplace_back(buf, p);
    if (globals.size() < 2) return;
    std::sort(globals.begin(), globals.end(), [](const auto& a, const auto& b) { return a.first->name < b.first->name; });
    // Buffers written in place over another are one scope with it.
    std::unordered_map<const Buffer*, const Buffer*> same;
    for (const auto& [read, written] : opts_.same_bytes) same[written] = read;
    auto root = [&](const Buffer* b) {
      for (auto it = same.find(b); it != same.end(); it = same.find(b)) b = it->second;
      return b;
    };
    llvm::MDBuilder md(ctx_);
    llvm::MDNode* domain = md.createAnonymousAliasScopeDomain(name_);
    std::unordered_map<llvm::Value*, size_t> which;
    std::map<const Buffer*, size_t> scope_of_root;
    std::vector<llvm::Metadata*> scopes;
    for (const auto& [buf, base] : globals) {
      auto [it, fresh] = scope_of_root.try_emplace(root(buf), scopes.size());
      if (fresh) scopes.push_back(md.createAnonymousAliasScope(domain, root(buf)->name));
      which[base] = it->second;
    }
    if (scopes.size() < 2) return;
    std::vector<llvm::MDNode*> own(scopes.size()), others(scopes.size());
    for (size_t i = 0; i < scopes.size(); ++i) {
      own[i] = llvm::MDNode::get(ctx_, {scopes[i]});
      std::vector<llvm::Metadata*> rest;
      for (size_t j = 0; j < scopes.size(); ++j)
        if (j != i) rest.push_back(scopes[j]);
      others[i] = llvm::MDNode::get(ctx_, rest);
    }
    for (llvm::BasicBlock& bb : *fn_)
      for (llvm::Instruction& in : bb) {
        llvm::Value* ptr = nullptr;
        if (auto* ld = llvm::dyn_cast<llvm::LoadInst>(&in)) ptr = ld->getPointerOperand();
        else if (auto* st = llvm::dyn_cast<llvm::StoreInst>(&in)) ptr = st->getPointerOperand();
        if (!ptr) continue;
        auto it = which.find(const_cast<llvm::Value*>(llvm::getUnderlyingObject(ptr)));
        if (it == which.end()) continue;
        in.setMetadata(llvm::LLVMContext::MD_alias_scope, own[it->second]);
        in.setMetadata(llvm::LLVMContext::MD_noalias, others[it->second]);
      }
  }

  const Buffer* buffer_of(const te::TensorNode* node) {
    auto it = node_to_buf_.find(node);  // a local first: it may shadow a parameter
    if (it != node_to_buf_.end()) return it->second;
    auto p = maps_->by_node.find(node);
    if (p == maps_->by_node.end()) throw InternalError("codegen: buffer '" + node->name + "' is not bound in " + name_);
    return p->second;
  }
  llvm::Value* buffer_base(const te::TensorNode* node) { return base_of(buffer_of(node)); }

  llvm::Value* to_value(llvm::Value* mem, DType t) {
    if (t == DType::Float16 || t == DType::BFloat16) return emit_widen(b_, mem);
    if (t == DType::Bool) return b_.CreateICmpNE(mem, llvm::Constant::getNullValue(mem->getType()));
    return mem;
  }
  llvm::Value* to_mem(llvm::Value* v, DType t) {
    llvm::Type* m = mem_type(t);
    llvm::Type* target = m;
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) target = llvm::VectorType::get(m, vt->getElementCount());
    if (t == DType::BFloat16) return emit_float_to_bfloat(b_, v);
    if (t == DType::Float16) return b_.CreateFPTrunc(v, target);
    if (t == DType::Bool) return b_.CreateZExt(v, target);
    return v;
  }

  // Scalar i64 index of a load/store with the vector variable (if any) fixed to base + lane.
  llvm::Value* scalar_index(const Expr& index, int lane) {
    const ExprNode* saved = vec_var_;
    if (saved) {
      vars_[saved] = b_.CreateAdd(vec_base_, b_.getInt64(static_cast<uint64_t>(lane)));
      vec_var_ = nullptr;
    }
    llvm::Value* idx = emit_expr(index, false);
    if (saved) {
      vec_var_ = saved;
      vars_.erase(saved);
    }
    return idx;
  }

  // Clamps an i64 index (scalar or vector) into [0, size).
  llvm::Value* clamp_index(llvm::Value* idx, int64_t size) {
    llvm::Value* zero = llvm::ConstantInt::get(idx->getType(), 0);
    llvm::Value* last = llvm::ConstantInt::get(idx->getType(), static_cast<uint64_t>(size - 1));
    llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSLT(idx, zero), zero, idx);
    return b_.CreateSelect(b_.CreateICmpSGT(lo, last), last, lo);
  }

  llvm::Value* scalar_load(const ExprNode* e, llvm::Value* idx, bool guarded) {
    const Buffer* buf = buffer_of(e->tensor.get());
    if (guarded) idx = clamp_index(idx, buf->size);
    llvm::Type* mt = mem_type(buf->dtype);
    llvm::Value* p = b_.CreateGEP(mt, buffer_base(e->tensor.get()), this_threads_copy(buf, idx));
    llvm::Value* v = b_.CreateLoad(mt, p);
    if (buf->dtype == DType::Float16 || buf->dtype == DType::BFloat16) return emit_widen(b_, v);
    if (buf->dtype == DType::Bool) return b_.CreateICmpNE(v, llvm::ConstantInt::get(mt, 0));
    return v;
  }

  // A per-thread buffer's index where the threads of a block run one after another (a GPU program on a
  // CPU): the buffer holds a copy per thread, and the enclosing thread loop's index picks one. In a
  // kernel each thread allocates its own copy, and the index stands.
  llvm::Value* this_threads_copy(const Buffer* buf, llvm::Value* idx) {
    if (buf->scope != lower::BufferScope::GpuPerThread || gpu_kernel_) return idx;
    if (!thread_index_) throw InternalError("codegen: per-thread buffer '" + buf->name + "' used outside a thread loop in " + name_);
    if (vec_var_) throw InternalError("codegen: per-thread buffer '" + buf->name + "' inside a vectorized loop in " + name_);
    return b_.CreateAdd(idx, b_.CreateMul(as_i64(thread_index_), b_.getInt64(static_cast<uint64_t>(buf->size))));
  }

  // ---- vector memory access ----------------------------------------------------------------------
  // Inside a vectorized loop an access is uniform (one element for every lane: a scalar access),
  // contiguous (coefficient 1: one vector access) or scattered (gather, scatter or one access per
  // lane). Under an `if` whose condition varies across lanes, mask_ holds the active lanes; the others
  // may index outside their buffer (the tail of a non-divisible split), so their accesses are masked
  // too, unless index_range proves that every lane of every iteration stays inside the buffer.

  // A lane-private buffer (see Allocate) differs per lane in a way linear_coeff cannot see.
  bool reads_lane_private(const ExprNode* e) const {
    if (lane_private_.empty()) return false;
    if (e->op == ExprOp::Load) {
      auto it = node_to_buf_.find(e->tensor.get());
      if (it != node_to_buf_.end() && lane_private_.count(it->second)) return true;
    }
    for (const Expr& a : e->args)
      if (reads_lane_private(a.get())) return true;
    return false;
  }
  std::optional<int64_t> vector_coeff(const Expr& index) const {
    if (reads_lane_private(index.get())) return std::nullopt;
    return linear_coeff(index.get(), vec_var_);
  }
  bool is_uniform(const Expr& e) const { return !depends_on(e.get(), vec_var_) && !reads_lane_private(e.get()); }
  bool stays_inside(const Expr& index, int64_t size) const {
    auto r = index_range(index.get(), ranges_);
    return r && r->lo >= 0 && r->hi < size;
  }

  llvm::Align align_of(const Buffer* buf) const { return llvm::Align(dtype_size(buf->dtype)); }
  llvm::VectorType* mem_vector(const Buffer* buf) {
    return llvm::VectorType::get(mem_type(buf->dtype), static_cast<unsigned>(lanes_), false);
  }
  llvm::Constant* lane_numbers() {
    std::vector<llvm::Constant*> steps;
    for (int l = 0; l < lanes_; ++l) steps.push_back(b_.getInt64(static_cast<uint64_t>(l)));
    return llvm::ConstantVector::get(steps);
  }
  // Whether every lane of the vector at index `first` lies on a page holding some of the buffer's
  // elements. Masked-off lanes of a masked load or store that reach a page that is unmapped or not yet
  // touched cost a microcode assist (fault suppression, about a thousand cycles) on x86, and a
  // broadcast row read at its end for every output row would pay that each time; a gather or scatter
  // never touches masked-off lanes.
  llvm::Value* on_buffer_pages(llvm::Value* basep, llvm::Value* first, const Buffer* buf) {
    constexpr uint64_t kPageBits = 12;  // 4 KiB, the smallest page of kiln's targets
    llvm::Type* mt = mem_type(buf->dtype);
    auto page_of = [&](llvm::Value* index) {
      return b_.CreateLShr(b_.CreatePtrToInt(b_.CreateGEP(mt, basep, index), b_.getInt64Ty()), kPageBits);
    };
    llvm::Value* last = b_.CreateAdd(first, b_.getInt64(static_cast<uint64_t>(lanes_ - 1)));
    return b_.CreateAnd(b_.CreateICmpUGE(page_of(first), page_of(b_.getInt64(0))),
                        b_.CreateICmpULE(page_of(last), page_of(b_.getInt64(static_cast<uint64_t>(buf->size - 1)))));
  }

  // Per-lane i64 indices: scalar arithmetic with the vector variable fixed per lane, unless the index
  // reads a lane-private buffer (then only its vector form knows each lane's value).
  std::vector<llvm::Value*> lane_indices(const Expr& index) {
    std::vector<llvm::Value*> out;
    llvm::Value* vec = reads_lane_private(index.get()) ? emit_expr(index, false) : nullptr;
    for (int l = 0; l < lanes_; ++l)
      out.push_back(vec ? b_.CreateExtractElement(vec, static_cast<uint64_t>(l)) : scalar_index(index, l));
    return out;
  }

  llvm::Value* emit_load(const ExprNode* e, bool guarded) {
    const Expr& index = e->args[0];
    if (!vec_var_) return scalar_load(e, emit_index(index), guarded);
    const Buffer* buf = buffer_of(e->tensor.get());
    if (lane_private_.count(buf)) return to_value(lane_private_load(buf, index, guarded), buf->dtype);
    auto coeff = vector_coeff(index);
    // One element for all lanes: a scalar load. Some lane is active (masked_region skips a body with
    // none), so the loop itself reads this element.
    if (coeff && *coeff == 0) return splat(scalar_load(e, scalar_index(index, 0), guarded));
    const bool inside = stays_inside(index, buf->size);
    if (inside) guarded = false;  // nothing to clamp
    llvm::Value* mask = inside ? nullptr : mask_;
    llvm::Type* mt = mem_type(buf->dtype);
    llvm::Value* basep = buffer_base(e->tensor.get());
    llvm::VectorType* vt = mem_vector(buf);
    llvm::Constant* zero = llvm::Constant::getNullValue(vt);  // masked-off lanes: integer division stays defined
    auto contiguous = [&](llvm::Value* first) -> llvm::Value* {
      return b_.CreateAlignedLoad(vt, b_.CreateGEP(mt, basep, first), align_of(buf));
    };
    // Lanes at arbitrary (clamped, when guarded) indices: one hardware gather where the target has it.
    // A local buffer is read lane by lane instead: with constant indices (unrolled register tiles)
    // SROA then keeps it in registers, which a gather would prevent.
    auto gather = [&]() -> llvm::Value* {
      if (buf->local && !mask) {
        llvm::Value* out = llvm::PoisonValue::get(vt);
        std::vector<llvm::Value*> idx = lane_indices(index);
        for (int l = 0; l < lanes_; ++l) {
          llvm::Value* i = guarded ? clamp_index(idx[static_cast<size_t>(l)], buf->size) : idx[static_cast<size_t>(l)];
          out = b_.CreateInsertElement(out, b_.CreateLoad(mt, b_.CreateGEP(mt, basep, i)), static_cast<uint64_t>(l));
        }
        return out;
      }
      llvm::Value* idx = emit_expr(index, false);
      if (guarded) idx = clamp_index(idx, buf->size);
      llvm::Value* ptrs = b_.CreateGEP(mt, basep, idx);
      return b_.CreateMaskedGather(vt, ptrs, align_of(buf), mask, zero);
    };
    if (coeff && *coeff == 1 && !guarded && !mask) return to_value(contiguous(scalar_index(index, 0)), buf->dtype);
    // A small stride (a strided convolution or pooling window along the vector axis): one contiguous
    // load of stride x lanes elements and a shuffle keeping every stride-th, where that load stays
    // inside the buffer, else a gather. A gather costs about a cycle per lane (more on AMD), the
    // shuffle a few instructions per vector. Local buffers keep lane loads (see gather).
    if (coeff && *coeff >= 2 && *coeff <= kMaxShuffledStride && !guarded && !mask && !buf->local) {
      const int64_t stride = *coeff;
      llvm::Value* first = scalar_index(index, 0);
      llvm::Value* fits = b_.CreateICmpSLE(first, b_.getInt64(static_cast<uint64_t>(buf->size - stride * lanes_)));
      llvm::Value* v = branch_value(fits, "load.strided", [&]() -> llvm::Value* {
        auto* wide = llvm::VectorType::get(mt, static_cast<unsigned>(stride * lanes_), false);
        llvm::Value* all = b_.CreateAlignedLoad(wide, b_.CreateGEP(mt, basep, first), align_of(buf));
        std::vector<int> every;
        for (int l = 0; l < lanes_; ++l) every.push_back(static_cast<int>(l * stride));
        return b_.CreateShuffleVector(all, every);
      }, [&] { return gather(); });
      return to_value(v, buf->dtype);
    }
    if (coeff && *coeff == 1) {
      // A guarded (padding, slicing) or masked (split tail) contiguous load is inside its buffer almost
      // everywhere: load the whole vector when all lanes are inside, and only at the buffer's edges
      // gather clamped lanes or load under the mask (masked loads are also scalarized on targets
      // without them).
      llvm::Value* first = scalar_index(index, 0);
      llvm::Value* last_first = b_.getInt64(static_cast<uint64_t>(buf->size - lanes_));
      llvm::Value* whole = b_.CreateAnd(b_.CreateICmpSGE(first, b_.getInt64(0)), b_.CreateICmpSLE(first, last_first));
      llvm::Value* v = branch_value(whole, "load.inside", [&] { return contiguous(first); }, [&]() -> llvm::Value* {
        if (guarded) return gather();
        return branch_value(
            on_buffer_pages(basep, first, buf), "load.masked",
            [&] { return b_.CreateMaskedLoad(vt, b_.CreateGEP(mt, basep, first), align_of(buf), mask, zero); },
            [&] { return gather(); });
      });
      return to_value(v, buf->dtype);
    }
    return to_value(gather(), buf->dtype);
  }

  void emit_store(const Stmt& s) {
    const Buffer* buf = s->buffer.get();
    llvm::Value* value = emit_expr(s->value, false);
    llvm::Type* mt = mem_type(buf->dtype);
    llvm::Value* basep = base_of(buf);
    if (!vec_var_) {
      b_.CreateStore(to_mem(value, buf->dtype), b_.CreateGEP(mt, basep, this_threads_copy(buf, emit_index(s->index))));
      return;
    }
    llvm::Value* mem = to_mem(value, buf->dtype);
    if (lane_private_.count(buf)) return lane_private_store(buf, s->index, mem);
    auto coeff = vector_coeff(s->index);
    // Under a mask, a local buffer no other task sees, indexed inside its bounds, is updated by
    // load-select-store (SROA keeps that in registers); any other buffer gets a masked store, which
    // leaves the masked-off elements untouched for whoever owns them.
    const bool blend = mask_ && buf->local && !shared_locals_.count(buf) && stays_inside(s->index, buf->size);
    if (coeff && *coeff == 1) {
      llvm::Value* first = scalar_index(s->index, 0);
      llvm::Value* p = b_.CreateGEP(mt, basep, first);
      if (mask_ && !blend) {
        auto scatter = [&] {
          llvm::Value* ptrs = b_.CreateGEP(mt, basep, emit_expr(s->index, false));
          b_.CreateMaskedScatter(mem, ptrs, align_of(buf), mask_);
        };
        branch(on_buffer_pages(basep, first, buf), "store.masked",
               [&] { b_.CreateMaskedStore(mem, p, align_of(buf), mask_); }, scatter);
        return;
      }
      if (mask_) mem = b_.CreateSelect(mask_, mem, b_.CreateAlignedLoad(mem->getType(), p, align_of(buf)));
      b_.CreateAlignedStore(mem, p, align_of(buf));
      return;
    }
    if (mask_ && !blend) {
      // A scatter writes lanes in order: of several active lanes storing one element, the last wins,
      // as in the loop.
      llvm::Value* ptrs = b_.CreateGEP(mt, basep, emit_expr(s->index, false));
      b_.CreateMaskedScatter(mem, ptrs, align_of(buf), mask_);
      return;
    }
    std::vector<llvm::Value*> idx = lane_indices(s->index);
    for (int l = 0; l < lanes_; ++l) {
      llvm::Value* p = b_.CreateGEP(mt, basep, idx[static_cast<size_t>(l)]);
      llvm::Value* lane = b_.CreateExtractElement(mem, static_cast<uint64_t>(l));
      if (mask_)
        lane = b_.CreateSelect(b_.CreateExtractElement(mask_, static_cast<uint64_t>(l)), lane, b_.CreateLoad(mt, p));
      b_.CreateStore(lane, p);
    }
  }

  // ---- lane-private buffers ----------------------------------------------------------------------
  // A buffer allocated inside a vectorized loop belongs to one iteration, so every lane gets its own
  // copy: element i of lane l lives at i * lanes + l. A uniform index is then one aligned vector
  // access at i * lanes, which SROA keeps in registers.
  llvm::Value* lane_private_first(const Buffer* buf, const Expr& index, bool guarded) {
    llvm::Value* idx = scalar_index(index, 0);
    if (guarded) idx = clamp_index(idx, buf->size);
    return b_.CreateMul(idx, b_.getInt64(static_cast<uint64_t>(lanes_)));
  }
  llvm::Value* lane_private_ptrs(const Buffer* buf, const Expr& index, bool guarded) {
    llvm::Value* idx = emit_expr(index, false);
    if (guarded) idx = clamp_index(idx, buf->size);
    llvm::Value* lanes = llvm::ConstantInt::get(idx->getType(), static_cast<uint64_t>(lanes_));
    llvm::Value* at = b_.CreateAdd(b_.CreateMul(idx, lanes), lane_numbers());
    return b_.CreateGEP(mem_type(buf->dtype), base_of(buf), at);
  }
  llvm::Value* lane_private_load(const Buffer* buf, const Expr& index, bool guarded) {
    llvm::VectorType* vt = mem_vector(buf);
    if (is_uniform(index)) {
      llvm::Value* p = b_.CreateGEP(mem_type(buf->dtype), base_of(buf), lane_private_first(buf, index, guarded));
      return b_.CreateAlignedLoad(vt, p, align_of(buf));
    }
    return b_.CreateMaskedGather(vt, lane_private_ptrs(buf, index, guarded), align_of(buf), mask_,
                                 llvm::Constant::getNullValue(vt));
  }
  void lane_private_store(const Buffer* buf, const Expr& index, llvm::Value* mem) {
    if (is_uniform(index)) {
      llvm::Value* p = b_.CreateGEP(mem_type(buf->dtype), base_of(buf), lane_private_first(buf, index, false));
      if (mask_) mem = b_.CreateSelect(mask_, mem, b_.CreateAlignedLoad(mem->getType(), p, align_of(buf)));
      b_.CreateAlignedStore(mem, p, align_of(buf));
      return;
    }
    b_.CreateMaskedScatter(mem, lane_private_ptrs(buf, index, false), align_of(buf), mask_);
  }

  // ---- expressions -------------------------------------------------------------------------------
  llvm::Value* constant(const ExprNode* e) {
    llvm::Type* t = scalar_type(e->dtype);
    llvm::Value* c = e->op == ExprOp::FloatImm
                         ? llvm::ConstantFP::get(t, e->float_value)
                         : llvm::ConstantInt::get(t, static_cast<uint64_t>(e->int_value), is_signed(e->dtype));
    return splat(c);
  }

  llvm::Value* emit_var(const ExprNode* e) {
    if (e == vec_var_) return b_.CreateAdd(splat(vec_base_), lane_numbers());
    auto it = vars_.find(e);
    if (it == vars_.end()) throw InternalError("codegen: unbound variable " + e->name + " in " + name_);
    return splat(as_i64(it->second));
  }

  llvm::Value* emit_expr(const Expr& expr, bool guarded) {
    const ExprNode* e = expr.get();
    switch (e->op) {
      case ExprOp::IntImm:
      case ExprOp::FloatImm: return constant(e);
      case ExprOp::Var: return emit_var(e);
      case ExprOp::Load: return emit_load(e, guarded);
      case ExprOp::Cast:
        if (llvm::Value* v = emit_requantize(*e, guarded)) return v;
        return emit_cast(b_, emit_expr(e->args[0], guarded), e->args[0]->dtype, e->dtype);
      case ExprOp::Reinterpret: {
        llvm::Value* v = emit_expr(e->args[0], guarded);
        return b_.CreateBitCast(v, value_type_like(v, e->dtype));
      }
      case ExprOp::Select: {
        // Both branches are evaluated (LLVM select): loads under them are clamped into their buffer.
        llvm::Value* c = emit_expr(e->args[0], guarded);
        llvm::Value* a = emit_expr(e->args[1], true);
        llvm::Value* b = emit_expr(e->args[2], true);
        return b_.CreateSelect(c, a, b);
      }
      default: break;
    }
    if (te::is_unary(e->op)) return emit_unary_op(b_, e->op, e->args[0]->dtype, emit_expr(e->args[0], guarded));
    if (llvm::Value* v = emit_dot4_instruction(e, guarded)) return v;
    bool logic = e->op == ExprOp::And || e->op == ExprOp::Or;
    llvm::Value* x = emit_expr(e->args[0], guarded);
    llvm::Value* y = emit_expr(e->args[1], guarded || logic);
    return emit_binary_op(b_, e->op, e->args[0]->dtype, x, y);
  }

  // A requantizing cast (requantize.h) in integer instructions where the target has them: 32-bit
  // Arm with a VFP, whose vectors (of int8 lanes) are scalars to the core; nullptr otherwise.
  llvm::Value* emit_requantize(const ExprNode& e, bool guarded) {
    if (!arm_vcvtr_) return nullptr;
    const std::optional<RequantizeForm> form = match_requantize(e);
    if (!form) return nullptr;
    llvm::Value* zero_point = nullptr;
    if (form->zero_point)
      zero_point = b_.CreateIntCast(emit_expr(form->zero_point, guarded), val_type(DType::Int32), is_signed(form->zero_point->dtype));
    llvm::Value* v = emit_requantize_vcvtr(b_, *form, emit_expr(form->scaled, guarded), zero_point);
    return b_.CreateTrunc(v, val_type(e.dtype));
  }

  // acc + dot4(a, b), or dot4(a, b) alone, in the instructions the target has for it: a Dot4U8S8
  // as vpdpbusd on a vector of 2 to 16 lanes (CodegenOptions::int8_dot), a Dot4S8S8 as sdot on 2
  // or 4 (int8_sdot), either as two SMLADs in scalar code (int8_smlad); nullptr otherwise.
  llvm::Value* emit_dot4_instruction(const ExprNode* e, bool guarded) {
    if (e->dtype != DType::Int32) return nullptr;
    const bool smlad = opts_.int8_smlad && !vec_var_;
    if (!smlad && (!vec_var_ || lanes_ > opts_.vector_bits / 32)) return nullptr;
    auto is_dot = [&](const ExprNode* x) {
      if (smlad) return x->op == ExprOp::Dot4U8S8 || x->op == ExprOp::Dot4S8S8;
      return (x->op == ExprOp::Dot4U8S8 && opts_.int8_dot && lanes_ >= 2 && lanes_ <= 16) ||
             (x->op == ExprOp::Dot4S8S8 && opts_.int8_sdot && (lanes_ == 2 || lanes_ == 4));
    };
    const Expr* acc = nullptr;
    const ExprNode* dot = e;
    if (e->op == ExprOp::Add) {
      const int side = is_dot(e->args[1].get()) ? 1 : is_dot(e->args[0].get()) ? 0 : -1;
      if (side < 0) return nullptr;
      acc = &e->args[static_cast<size_t>(1 - side)];
      dot = e->args[static_cast<size_t>(side)].get();
    } else if (!is_dot(e)) {
      return nullptr;
    }
    llvm::Value* sum = acc ? emit_expr(*acc, guarded) : llvm::Constant::getNullValue(val_type(DType::Int32));
    llvm::Value* a = emit_expr(dot->args[0], guarded);
    llvm::Value* b = emit_expr(dot->args[1], guarded);
    if (smlad) return emit_smlad_pairs(dot->op == ExprOp::Dot4S8S8, sum, a, b);
    if (dot->op == ExprOp::Dot4S8S8) {
      // sdot reads its operands as byte vectors: four bytes per int32 lane, in the same order.
      auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), static_cast<unsigned>(4 * lanes_));
      return b_.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_sdot, {val_type(DType::Int32), bytes},
                                {splat(sum), b_.CreateBitCast(splat(a), bytes), b_.CreateBitCast(splat(b), bytes)});
    }
    // A row of another width (a 13 x 13 map's 13 columns) runs in the next instruction width, its
    // extra lanes unused: the byte-by-byte expansion costs about ten instructions a lane.
    const int width = lanes_ <= 4 ? 4 : lanes_ <= 8 ? 8 : 16;
    const llvm::Intrinsic::ID id = width == 16  ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                                   : width == 8 ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                                                : llvm::Intrinsic::x86_avx512_vpdpbusd_128;
    if (width == lanes_) return b_.CreateIntrinsic(id, {}, {splat(sum), splat(a), splat(b)});
    std::vector<int> widen(static_cast<size_t>(width), -1), narrow(static_cast<size_t>(lanes_));
    for (int l = 0; l < lanes_; ++l) widen[static_cast<size_t>(l)] = narrow[static_cast<size_t>(l)] = l;
    auto wide = [&](llvm::Value* v) { return b_.CreateShuffleVector(splat(v), widen); };
    return b_.CreateShuffleVector(b_.CreateIntrinsic(id, {}, {wide(sum), wide(a), wide(b)}), narrow);
  }

  // sum + dot4(a, b) on 32-bit Arm with the DSP extension: each operand's bytes 0 and 2, then 1 and
  // 3 (SXTB16, or UXTB16 for Dot4U8S8's unsigned side; the second through the rotation by 8 the
  // instruction has for free) as two 16-bit halves, and two SMLADs, each adding two products. The
  // products of bytes fit 16 x 16 bits, and SMLAD's sum wraps as the int32 sum does (it only sets
  // the Q flag), so the result is the same integer: six instructions for four multiply-adds.
  llvm::Value* emit_smlad_pairs(bool a_signed, llvm::Value* sum, llvm::Value* a, llvm::Value* b) {
    auto halves = [&](llvm::Value* v, bool is_signed, bool odd) {
      if (odd) v = b_.CreateIntrinsic(llvm::Intrinsic::fshr, {b_.getInt32Ty()}, {v, v, b_.getInt32(8)});
      return b_.CreateIntrinsic(is_signed ? llvm::Intrinsic::arm_sxtb16 : llvm::Intrinsic::arm_uxtb16, {}, {v});
    };
    for (bool odd : {false, true})
      sum = b_.CreateIntrinsic(llvm::Intrinsic::arm_smlad, {}, {halves(a, a_signed, odd), halves(b, true, odd), sum});
    return sum;
  }

  // ---- statements --------------------------------------------------------------------------------
  // if (cond) then_fn() else else_fn(), each side free to emit its own blocks.
  template <typename Then, typename Else>
  void branch(llvm::Value* cond, const std::string& name, Then then_fn, Else else_fn) {
    auto* then_bb = llvm::BasicBlock::Create(ctx_, name + ".then", fn_);
    auto* else_bb = llvm::BasicBlock::Create(ctx_, name + ".else", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, name + ".join", fn_);
    b_.CreateCondBr(cond, then_bb, else_bb);
    b_.SetInsertPoint(then_bb);
    then_fn();
    b_.CreateBr(join);
    b_.SetInsertPoint(else_bb);
    else_fn();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }
  // cond ? then_fn() : else_fn(), the value computed in branches.
  template <typename Then, typename Else>
  llvm::Value* branch_value(llvm::Value* cond, const std::string& name, Then then_fn, Else else_fn) {
    llvm::Value *a = nullptr, *b = nullptr;
    llvm::BasicBlock *a_end = nullptr, *b_end = nullptr;
    branch(
        cond, name,
        [&] {
          a = then_fn();
          a_end = b_.GetInsertBlock();
        },
        [&] {
          b = else_fn();
          b_end = b_.GetInsertBlock();
        });
    llvm::PHINode* phi = b_.CreatePHI(a->getType(), 2);
    phi->addIncoming(a, a_end);
    phi->addIncoming(b, b_end);
    return phi;
  }

  // for (v = lo; v < hi; v += step) body(v)
  template <typename Body>
  void counted_loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::string& name, Body body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, name + ".head", fn_);
    auto* loop = llvm::BasicBlock::Create(ctx_, name + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* v = b_.CreatePHI(lo->getType(), 2, name);
    v->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(v, hi), loop, exit);
    b_.SetInsertPoint(loop);
    body(v);
    llvm::Value* next = b_.CreateAdd(v, llvm::ConstantInt::get(lo->getType(), static_cast<uint64_t>(step)));
    v->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
  }

  // One vector iteration of vectorized loop `s`: lanes base .. base + lanes - 1 (`base` is a value;
  // `constant_base` its value when known).
  void emit_vector_iteration(const Stmt& s, llvm::Value* base, int lanes, std::optional<int64_t> constant_base) {
    const ExprNode* var = s->var.get();
    if (constant_base) ranges_[var] = {*constant_base, *constant_base + lanes - 1};
    vec_var_ = var;
    vec_base_ = base;
    lanes_ = lanes;
    emit_stmt(s->body[0]);
    vec_var_ = nullptr;
  }

  // The iterations of vectorized loop `s` from `from` on, fewer than `lanes`: vectors of half, a
  // quarter ... of the width, then at most one scalar iteration (13 = 8 + 4 + 1). A loop whose extent
  // is not a multiple of the vector width (an output row of 13, 14 or 56) would otherwise run its
  // tail one element at a time, and a row shorter than a vector not vectorized at all. Narrower
  // vectors need no mask, unlike one masked full-width vector, whose loads each need a check that
  // the masked-off lanes stay inside the buffer.
  void emit_vector_tail(const Stmt& s, int64_t from, int lanes) {
    for (int width = lanes / 2; width >= 2; width /= 2)
      if (s->extent - from >= width) {
        emit_vector_iteration(s, b_.getInt64(static_cast<uint64_t>(from)), width, from);
        from += width;
      }
    const ExprNode* var = s->var.get();
    for (; from < s->extent; ++from) {
      vars_[var] = index_const(from);
      ranges_[var] = {from, from};
      emit_stmt(s->body[0]);
    }
    vars_.erase(var);
  }

  void emit_for(const Stmt& s) {
    const ExprNode* var = s->var.get();
    // Inside a task a parallel loop runs serially: the task already holds one of the hook's workers,
    // and a hook need not support being called from its own tasks.
    if (s->for_kind == ForKind::Parallel && !vec_var_ && !in_task_ && s->extent > 1) return emit_parallel(s);
    // Every loop variable's range, for index_range; removed when the loop ends.
    struct RangeScope {
      VarRanges& ranges;
      const ExprNode* var;
      ~RangeScope() { ranges.erase(var); }
    } scope{ranges_, var};
    const int64_t last = std::max<int64_t>(s->extent - 1, 0);
    if ((s->for_kind == ForKind::GpuBlock || s->for_kind == ForKind::GpuThread) && gpu_kernel_) {
      // The launch makes exactly `extent` blocks (threads), so the variable is the index itself.
      ranges_[var] = {0, last};
      auto id = s->for_kind == ForKind::GpuBlock ? llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x
                                                 : llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x;
      vars_[var] = b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), b_.getInt64Ty(), var->name);
      emit_stmt(s->body[0]);
      vars_.erase(var);
      return;
    }
    if (s->for_kind == ForKind::GpuThread) {
      // On a CPU: a serial loop whose index also selects each per-thread buffer's copy.
      ranges_[var] = {0, last};
      counted_loop(b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(s->extent)), 1, var->name, [&](llvm::Value* v) {
        vars_[var] = thread_index_ = v;
        emit_stmt(s->body[0]);
        vars_.erase(var);
        thread_index_ = nullptr;
      });
      return;
    }
    if (s->for_kind == ForKind::Vectorized && !vec_var_) {
      int lanes = lanes_for(dtype_of_body(s->body[0]));
      int64_t main = s->extent / lanes * lanes;
      if (lanes > 1 && s->extent <= 4 * static_cast<int64_t>(lanes)) {
        // A short vectorized loop (a register tile's row): straight-line vector code, so the local
        // accumulator indices are constants and SROA keeps the tile in registers.
        for (int64_t base = 0; base < main; base += lanes) emit_vector_iteration(s, b_.getInt64(static_cast<uint64_t>(base)), lanes, base);
        emit_vector_tail(s, main, lanes);
        return;
      }
      if (lanes > 1 && main > 0) {
        ranges_[var] = {0, main - 1};
        counted_loop(b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(main)), lanes, var->name + ".vec",
                     [&](llvm::Value* v) { emit_vector_iteration(s, v, lanes, std::nullopt); });
      }
      if (lanes > 1) return emit_vector_tail(s, main, lanes);
      ranges_[var] = {0, last};
      counted_loop(index_const(0), index_const(s->extent), 1, var->name + ".tail",
                   [&](llvm::Value* v) {
                     vars_[var] = v;
                     emit_stmt(s->body[0]);
                     vars_.erase(var);
                   });
      return;
    }
    if (s->for_kind == ForKind::Unrolled && s->extent <= 16) {
      // Fully unrolled: the body once per iteration with the variable bound to a constant.
      for (int64_t i = 0; i < s->extent; ++i) {
        vars_[var] = index_const(i);
        ranges_[var] = {i, i};
        emit_stmt(s->body[0]);
      }
      vars_.erase(var);
      return;
    }
    // Serial loops, longer Unrolled ones (LLVM's unroller decides), and, inside a vectorized loop,
    // nested loops of any kind: their variable is scalar and every lane runs the same iterations,
    // while values in the body stay vectors computed with the vector variable.
    ranges_[var] = {0, last};
    counted_loop(index_const(0), index_const(s->extent), 1, var->name, [&](llvm::Value* v) {
      vars_[var] = v;
      emit_stmt(s->body[0]);
      vars_.erase(var);
    });
  }

  // The widest-lane dtype stored in a loop body decides its vector width (smallest element wins lanes).
  DType dtype_of_body(const Stmt& s) {
    DType best = DType::Float32;
    size_t best_size = 0;
    std::function<void(const Stmt&)> walk = [&](const Stmt& st) {
      if (!st) return;
      if (st->kind == StmtKind::Store) {
        size_t sz = std::max<size_t>(dtype_size(st->buffer->dtype), 4);
        if (st->buffer->dtype == DType::Float64 || dtype_size(st->buffer->dtype) == 8) sz = 8;
        if (sz > best_size) {
          best_size = sz;
          best = st->buffer->dtype;
        }
      }
      for (const Stmt& b : st->body) walk(b);
    };
    walk(s);
    return best;
  }

  void emit_parallel(const Stmt& s);

  // A runtime kernel (runtime/kernels/): `void callee(void*..., int64_t...)`, declared here and
  // defined by the kernel object the package adds to the archive.
  void emit_extern_call(const Stmt& s) {
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    std::vector<llvm::Type*> types(s->args.size(), ptr);
    types.insert(types.end(), s->int_args.size(), b_.getInt64Ty());
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), types, false);
    if (llvm::Function* existing = m_.getFunction(s->callee); existing && existing->getFunctionType() != fty)
      throw Error("codegen: runtime kernel " + s->callee + " called with two different parameter lists");
    llvm::FunctionCallee callee = m_.getOrInsertFunction(s->callee, fty);
    if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) fn->addFnAttr(llvm::Attribute::NoUnwind);
    std::vector<llvm::Value*> args;
    for (const lower::BufferRef& buf : s->args)
      args.push_back(buf ? base_of(buf.get()) : llvm::ConstantPointerNull::get(ptr));
    for (int64_t v : s->int_args) args.push_back(b_.getInt64(static_cast<uint64_t>(v)));
    b_.CreateCall(callee, args);
  }

  // llvm.prefetch(read, keep in every cache level, data) of one element's line. The address is a plain
  // (not inbounds) GEP: a prefetch may name a place past the buffer, and the hint never faults.
  void emit_prefetch(const Stmt& s) {
    const lower::Buffer* buf = s->buffer.get();
    llvm::Value* index = vec_var_ ? emit_uniform_scalar(s->index) : emit_index(s->index);
    llvm::Value* p = b_.CreateGEP(mem_type(buf->dtype), base_of(buf), index);
    llvm::Function* fn = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {p->getType()});
    b_.CreateCall(fn, {p, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
  }

  // A condition that does not vary across lanes, as one scalar i1.
  llvm::Value* emit_uniform_scalar(const Expr& cond) {
    const ExprNode* saved = vec_var_;
    vec_var_ = nullptr;
    llvm::Value* c = emit_expr(cond, false);
    vec_var_ = saved;
    return c;
  }

  // `if` whose condition varies across lanes (the tail of a non-divisible split): the condition is a
  // lane mask, and each branch runs under its lanes (masked stores, masked or proven-safe loads).
  void emit_vector_if(const Stmt& s) {
    llvm::Value* c = emit_expr(s->cond, false);
    llvm::Value* outer = mask_;
    masked_region(s->body[0], outer ? b_.CreateAnd(outer, c) : c);
    if (s->body[1]) {
      llvm::Value* not_c = b_.CreateNot(c);
      masked_region(s->body[1], outer ? b_.CreateAnd(outer, not_c) : not_c);
    }
  }

  // Runs `body` for the lanes in `mask`. Nothing runs when no lane is active: the loop would not run
  // it either, and uniform loads in the body may then be out of range. Outside any mask, a body with
  // every lane active runs unmasked: most iterations of a guarded split are whole, and masked memory
  // access costs more than plain on most targets (it is scalarized where the target has none).
  void masked_region(const Stmt& body, llvm::Value* mask) {
    if (!body) return;
    auto* done = llvm::BasicBlock::Create(ctx_, "mask.done", fn_);
    auto* some = llvm::BasicBlock::Create(ctx_, "mask.some", fn_);
    if (!mask_) {
      auto* all = llvm::BasicBlock::Create(ctx_, "mask.all", fn_);
      auto* check = llvm::BasicBlock::Create(ctx_, "mask.check", fn_);
      b_.CreateCondBr(b_.CreateAndReduce(mask), all, check);
      b_.SetInsertPoint(all);
      emit_stmt(body);
      b_.CreateBr(done);
      b_.SetInsertPoint(check);
    }
    b_.CreateCondBr(b_.CreateOrReduce(mask), some, done);
    b_.SetInsertPoint(some);
    llvm::Value* saved = mask_;
    mask_ = mask;
    emit_stmt(body);
    mask_ = saved;
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  void emit_stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::For: emit_for(s); return;
      case StmtKind::Store: emit_store(s); return;
      case StmtKind::Allocate: {
        // Inside a vectorized loop each lane gets its own copy (lane-private buffers, above), and a
        // per-thread buffer one per thread where the threads run one after another.
        const Buffer* buf = s->buffer.get();
        uint64_t copies = vec_var_ ? static_cast<uint64_t>(lanes_) : 1;
        if (buf->scope == lower::BufferScope::GpuPerThread && !gpu_kernel_) copies = static_cast<uint64_t>(buf->threads);
        auto* arr = llvm::ArrayType::get(mem_type(buf->dtype), static_cast<uint64_t>(buf->size) * copies);
        if (buf->scope == lower::BufferScope::GpuShared && gpu_kernel_) {
          // Addressed in the shared space itself (not through a generic pointer), so that the load-store
          // vectorizer sees the array's alignment and joins a thread's adjacent loads into one vector.
          base_[buf] = shared_array(arr, buf->name);
        } else {
          llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
          llvm::AllocaInst* a = entry.CreateAlloca(arr, nullptr, buf->name);
          a->setAlignment(llvm::Align(64));
          base_[buf] = a;
        }
        node_to_buf_[s->buffer->node.get()] = s->buffer.get();
        if (vec_var_) lane_private_.insert(s->buffer.get());
        emit_stmt(s->body[0]);
        base_.erase(s->buffer.get());
        node_to_buf_.erase(s->buffer->node.get());
        lane_private_.erase(s->buffer.get());
        return;
      }
      case StmtKind::IfThenElse: {
        if (vec_var_ && !is_uniform(s->cond)) return emit_vector_if(s);
        // A condition all lanes share stays a branch.
        llvm::Value* c = vec_var_ ? emit_uniform_scalar(s->cond) : emit_expr(s->cond, false);
        branch(c, "if", [&] { emit_stmt(s->body[0]); }, [&] { emit_stmt(s->body[1]); });
        return;
      }
      case StmtKind::Block:
        for (const Stmt& b : s->body) emit_stmt(b);
        return;
      case StmtKind::ExternCall:
        if (vec_var_) throw Error("codegen: extern call inside a vectorized loop");
        emit_extern_call(s);
        return;
      case StmtKind::Prefetch: emit_prefetch(s); return;
      case StmtKind::Barrier:
        // Threads that run one after another need none: each thread loop has finished all threads.
        if (gpu_kernel_) b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::nvvm_barrier0));
        return;
    }
  }

  // A block's shared-memory array: a module variable in NVPTX's shared address space (3), one per
  // Allocate, its contents undefined at the start of each block.
  llvm::Value* shared_array(llvm::ArrayType* type, const std::string& name) {
    auto* g = new llvm::GlobalVariable(m_, type, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(type),
                                       name_ + "." + name, nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    g->setAlignment(llvm::Align(16));
    return g;
  }

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const CodegenOptions& opts_;
  const std::vector<lower::BufferRef>& params_;
  std::string name_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* buffers_arg_ = nullptr;
  llvm::Value* parallel_arg_ = nullptr;
  std::unordered_map<const Buffer*, llvm::Value*> base_;
  std::shared_ptr<const ParamMaps> maps_;                // set by bind_params
  std::unordered_map<const te::TensorNode*, const Buffer*> node_to_buf_;  // local buffers in scope
  std::unordered_map<const ExprNode*, llvm::Value*> vars_;
  const ExprNode* vec_var_ = nullptr;
  llvm::Value* vec_base_ = nullptr;
  int lanes_ = 1;
  llvm::Value* mask_ = nullptr;                          // active lanes under a varying `if`; null: all
  llvm::Value* thread_index_ = nullptr;                  // a GpuThread loop's index on a CPU (per-thread copies)
  std::unordered_set<const Buffer*> lane_private_;      // allocated inside the vectorized loop
  // VCVTR for requantization (emit_requantize): a VFP, and the triple is 32-bit Arm's (AArch64
  // names its FPU +fp-armv8 too).
  const bool arm_vcvtr_ = opts_.arm_vfp && is_32bit_arm(m_);
  std::unordered_set<const Buffer*> shared_locals_;     // another function's locals, via a closure
  VarRanges ranges_;                                    // loop variables in scope
  bool in_task_ = false;                                // emitting a parallel loop's task function
  bool gpu_kernel_ = false;                             // emitting a CUDA kernel (emit_kernel)
  int outlined_ = 0;
};

// A parallel loop: its body becomes `void task(closure*, i64 index)`; the closure carries the buffer
// array, the parallel hook, the enclosing loop variables and the base pointers of the enclosing local
// buffers (written before the loop, read or written at disjoint places by the tasks). The hook runs
// the tasks (or, without one, a serial loop does).
void FuncEmitter::emit_parallel(const Stmt& s) {
  auto* ptr = llvm::PointerType::get(ctx_, 0);
  auto* i64 = b_.getInt64Ty();
  // Closure fields in name order, so the same loop nest always gives the same module.
  auto by_name = [](const auto* a, const auto* b) { return a->name != b->name ? a->name < b->name : a < b; };
  std::vector<const ExprNode*> captured;
  for (const auto& [v, val] : vars_) captured.push_back(v);
  std::sort(captured.begin(), captured.end(), by_name);
  std::vector<const Buffer*> locals;
  for (const auto& [buf, p] : base_)
    if (buf->local) locals.push_back(buf);
  std::sort(locals.begin(), locals.end(), by_name);
  std::vector<llvm::Type*> fields = {ptr, ptr};
  fields.insert(fields.end(), captured.size(), i64);
  fields.insert(fields.end(), locals.size(), ptr);
  auto* closure_ty = llvm::StructType::get(ctx_, fields);
  const auto var_field = [](size_t i) { return static_cast<unsigned>(2 + i); };
  const auto local_field = [&](size_t i) { return static_cast<unsigned>(2 + captured.size() + i); };

  // The task function.
  auto* task_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64}, false);
  auto* task = llvm::Function::Create(task_ty, llvm::Function::InternalLinkage,
                                      name_ + ".task" + std::to_string(outlined_++), m_);
  task->addFnAttr(llvm::Attribute::NoUnwind);
  {
    FuncEmitter inner(m_, opts_, params_, maps_);
    inner.fn_ = task;
    inner.name_ = task->getName().str();
    inner.in_task_ = true;
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", task);
    inner.b_.SetInsertPoint(entry);
    llvm::Value* cl = task->getArg(0);
    // Bind the task's buffers from the closure's array, like the enclosing function's.
    inner.buffers_arg_ = inner.b_.CreateLoad(ptr, inner.b_.CreateStructGEP(closure_ty, cl, 0));
    inner.parallel_arg_ = inner.b_.CreateLoad(ptr, inner.b_.CreateStructGEP(closure_ty, cl, 1));
    inner.bind_params();
    for (size_t i = 0; i < captured.size(); ++i)
      inner.vars_[captured[i]] = inner.b_.CreateLoad(i64, inner.b_.CreateStructGEP(closure_ty, cl, var_field(i)));
    for (size_t i = 0; i < locals.size(); ++i) {
      llvm::Value* slot = inner.b_.CreateStructGEP(closure_ty, cl, local_field(i));
      inner.base_[locals[i]] = inner.b_.CreateLoad(ptr, slot, locals[i]->name);
      inner.node_to_buf_[locals[i]->node.get()] = locals[i];
      inner.shared_locals_.insert(locals[i]);
    }
    inner.ranges_ = ranges_;
    inner.ranges_[s->var.get()] = {0, s->extent - 1};
    inner.vars_[s->var.get()] = task->getArg(1);
    inner.emit_stmt(s->body[0]);
    inner.b_.CreateRetVoid();
    inner.mark_distinct_buffers();
  }

  // The call site.
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst* closure = entry.CreateAlloca(closure_ty);
  b_.CreateStore(buffers_arg_, b_.CreateStructGEP(closure_ty, closure, 0));
  b_.CreateStore(parallel_arg_, b_.CreateStructGEP(closure_ty, closure, 1));
  for (size_t i = 0; i < captured.size(); ++i)
    b_.CreateStore(as_i64(vars_.at(captured[i])), b_.CreateStructGEP(closure_ty, closure, var_field(i)));
  for (size_t i = 0; i < locals.size(); ++i)
    b_.CreateStore(base_.at(locals[i]), b_.CreateStructGEP(closure_ty, closure, local_field(i)));
  auto* par_ty = parallel_struct_type(ctx_);
  auto* has_par = llvm::BasicBlock::Create(ctx_, "par.hook", fn_);
  auto* check_fn = llvm::BasicBlock::Create(ctx_, "par.check", fn_);
  auto* serial = llvm::BasicBlock::Create(ctx_, "par.serial", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "par.done", fn_);
  b_.CreateCondBr(b_.CreateIsNull(parallel_arg_), serial, check_fn);
  b_.SetInsertPoint(check_fn);
  llvm::Value* hook = b_.CreateLoad(ptr, b_.CreateStructGEP(par_ty, parallel_arg_, 0));
  b_.CreateCondBr(b_.CreateIsNull(hook), serial, has_par);
  b_.SetInsertPoint(has_par);
  llvm::Value* user = b_.CreateLoad(ptr, b_.CreateStructGEP(par_ty, parallel_arg_, 1));
  auto* hook_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, ptr, ptr}, false);
  b_.CreateCall(hook_ty, hook, {user, b_.getInt64(static_cast<uint64_t>(s->extent)), task, closure});
  b_.CreateBr(done);
  b_.SetInsertPoint(serial);
  counted_loop(b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(s->extent)), 1, s->var->name + ".serial",
               [&](llvm::Value* v) { b_.CreateCall(task_ty, task, {closure, v}); });
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

// The threadIdx.x loops of a block's body (not looking inside them), in order.
void thread_loops(const Stmt& s, std::vector<const lower::StmtNode*>& out) {
  if (!s) return;
  if (s->kind == StmtKind::For && s->for_kind == ForKind::GpuThread) return out.push_back(s.get());
  for (const Stmt& b : s->body) thread_loops(b, out);
}

// The grid and block of a kernel statement: a GpuBlock loop whose body holds threadIdx.x loops, all of
// one extent (the block's threads: a thread loop runs every thread once, with no guard).
GpuKernel launch_of(const Stmt& s, const std::string& name) {
  std::vector<const lower::StmtNode*> threads;
  if (s && s->kind == StmtKind::For && s->for_kind == ForKind::GpuBlock) thread_loops(s->body[0], threads);
  if (threads.empty()) throw Error("GPU code generation: " + name + " is not a blockIdx.x loop around threadIdx.x loops");
  for (const lower::StmtNode* t : threads)
    if (t->extent != threads[0]->extent)
      throw Error("GPU code generation: the threadIdx.x loops of " + name + " differ in extent (" +
                  std::to_string(threads[0]->extent) + ", " + std::to_string(t->extent) + ")");
  return {name, s->extent, threads[0]->extent};
}

}  // namespace

std::vector<GpuKernel> emit_gpu_kernels(const lower::LoweredFunc& f, const CodegenOptions& opts, llvm::Module& module) {
  std::vector<Stmt> stmts;
  if (f.body && f.body->kind == StmtKind::Block) stmts = f.body->body;
  else if (f.body) stmts.push_back(f.body);
  std::vector<GpuKernel> kernels;
  llvm::NamedMDNode* annotations = module.getOrInsertNamedMetadata("nvvm.annotations");
  llvm::LLVMContext& ctx = module.getContext();
  for (const Stmt& s : stmts) {
    if (!s || (s->kind == StmtKind::Block && s->body.empty())) continue;  // a stage with no elements
    GpuKernel k = launch_of(s, f.name + "_k" + std::to_string(kernels.size()));
    FuncEmitter fe(module, opts, f.params);
    llvm::Function* fn = fe.emit_kernel(k.name, s);
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyFunction(*fn, &os)) throw InternalError("codegen: invalid LLVM IR for " + k.name + ": " + os.str());
    // NVPTX makes a function an entry point (.entry) when nvvm.annotations marks it a kernel; maxntidx
    // (.maxntid) tells ptxas the block's exact size, which bounds the registers it may give a thread.
    auto annotate = [&](const char* key, int64_t value) {
      annotations->addOperand(llvm::MDNode::get(
          ctx, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, key),
                llvm::ValueAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), static_cast<uint64_t>(value)))}));
    };
    annotate("kernel", 1);
    annotate("maxntidx", k.block);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

CodegenOptions codegen_options(int vector_bits, const std::string& features) {
  auto has = [&](const std::string& f) { return has_feature(features, f); };
  CodegenOptions o;
  o.vector_bits = vector_bits;
  o.int8_dot = (has("+avx512vnni") && (vector_bits == 512 || has("+avx512vl"))) || (has("+avxvnni") && vector_bits <= 256);
  o.int8_sdot = has("+dotprod");
  o.int8_smlad = has("+dsp");
  for (const char* fpu : {"+vfp2", "+vfp3", "+vfp4", "+fp-armv8"})
    o.arm_vfp |= ("," + features).find(std::string(",") + fpu) != std::string::npos;
  return o;
}

void emit_functions(const std::vector<lower::LoweredFunc>& funcs, const CodegenOptions& opts, llvm::Module& module) {
  for (const auto& f : funcs) {
    FuncEmitter fe(module, opts, f.params);
    llvm::Function* fn = fe.emit(f);
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyFunction(*fn, &os)) throw InternalError("codegen: invalid LLVM IR for " + f.name + ": " + os.str());
  }
}

}  // namespace kiln::llvm_backend
