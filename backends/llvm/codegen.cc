#include "backends/llvm/codegen.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <optional>
#include <unordered_map>

#include "backends/llvm/math_polynomials.h"
#include "frontend/ir/error.h"
#include "scheduler/te/compute.h"

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

bool depends_on(const ExprNode* e, const ExprNode* v) {
  if (e == v) return true;
  for (const Expr& a : e->args)
    if (depends_on(a.get(), v)) return true;
  return false;
}

// The constant coefficient of `v` in `e` when `e` is affine in `v`; nullopt otherwise.
std::optional<int64_t> linear_coeff(const ExprNode* e, const ExprNode* v) {
  if (e == v) return 1;
  if (!depends_on(e, v)) return 0;
  if (e->op == ExprOp::Add || e->op == ExprOp::Sub) {
    auto a = linear_coeff(e->args[0].get(), v), b = linear_coeff(e->args[1].get(), v);
    if (!a || !b) return std::nullopt;
    return e->op == ExprOp::Add ? *a + *b : *a - *b;
  }
  if (e->op == ExprOp::Mul) {
    const ExprNode* x = e->args[0].get();
    const ExprNode* y = e->args[1].get();
    if (y->op == ExprOp::IntImm) std::swap(x, y);
    if (x->op != ExprOp::IntImm) return std::nullopt;
    auto c = linear_coeff(y, v);
    if (!c) return std::nullopt;
    return *c * x->int_value;
  }
  return std::nullopt;
}

class FuncEmitter {
 public:
  FuncEmitter(llvm::Module& m, const CodegenOptions& opts, const std::vector<lower::BufferRef>& params)
      : m_(m), ctx_(m.getContext()), b_(ctx_), opts_(opts), params_(params) {}

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
      for (size_t i = 0; i < f.body->body.size(); ++i) {
        lower::LoweredFunc part{f.name + ".s" + std::to_string(i), f.params, f.body->body[i], {}};
        FuncEmitter sub(m_, opts_, params_);
        llvm::Function* pf = sub.emit(part);
        pf->setLinkage(llvm::GlobalValue::InternalLinkage);
        pf->addFnAttr(llvm::Attribute::NoInline);
        b_.CreateCall(pf, {buffers_arg_, parallel_arg_});
      }
      b_.CreateRetVoid();
      return fn_;
    }
    bind_params();
    emit_stmt(f.body);
    b_.CreateRetVoid();
    return fn_;
  }

 private:
  // ---- types -------------------------------------------------------------------------------------
  llvm::Type* mem_type(DType t) {
    switch (t) {
      case DType::Float32: return b_.getFloatTy();
      case DType::Float64: return b_.getDoubleTy();
      case DType::Float16: return b_.getHalfTy();
      case DType::BFloat16: return b_.getBFloatTy();
      case DType::Bool: return b_.getInt8Ty();
      default: return b_.getIntNTy(static_cast<unsigned>(8 * dtype_size(t)));
    }
  }
  llvm::Type* scalar_type(DType t) {
    if (t == DType::Float16 || t == DType::BFloat16) return b_.getFloatTy();
    if (t == DType::Bool) return b_.getInt1Ty();
    return mem_type(t);
  }
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

  // ---- buffers -----------------------------------------------------------------------------------
  // Global buffers are bound lazily: a stage touches a few of a model's thousands of tensors.
  void bind_params() {
    for (size_t i = 0; i < params_.size(); ++i) {
      param_index_[params_[i].get()] = i;
      node_to_buf_[params_[i]->node.get()] = params_[i].get();
    }
  }

  llvm::Value* base_of(const Buffer* buf) {
    auto it = base_.find(buf);
    if (it != base_.end()) return it->second;
    auto pi = param_index_.find(buf);
    if (pi == param_index_.end()) throw Error("codegen: buffer '" + buf->name + "' is not bound in " + name_);
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    // At the top of the entry block, or right after the buffer array is loaded (task functions).
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().getFirstInsertionPt());
    if (auto* def = llvm::dyn_cast<llvm::Instruction>(buffers_arg_)) entry.SetInsertPoint(def->getNextNode());
    llvm::Value* slot = entry.CreateConstGEP1_64(ptr, buffers_arg_, pi->second);
    llvm::Value* p = entry.CreateLoad(ptr, slot, buf->name);
    base_[buf] = p;
    return p;
  }

  const Buffer* buffer_of(const te::TensorNode* node) {
    auto it = node_to_buf_.find(node);
    if (it == node_to_buf_.end()) throw Error("codegen: buffer '" + node->name + "' is not bound in " + name_);
    return it->second;
  }
  llvm::Value* buffer_base(const te::TensorNode* node) { return base_of(buffer_of(node)); }

  llvm::Value* to_value(llvm::Value* mem, DType t) {
    if (t == DType::Float16 || t == DType::BFloat16) return b_.CreateFPExt(mem, val_type_of(mem, t));
    if (t == DType::Bool) return b_.CreateICmpNE(mem, llvm::Constant::getNullValue(mem->getType()));
    return mem;
  }
  llvm::Type* val_type_of(llvm::Value* like, DType t) {
    llvm::Type* s = scalar_type(t);
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like->getType())) return llvm::VectorType::get(s, vt->getElementCount());
    return s;
  }
  // float -> bfloat16 with round-to-nearest-even on the bits: LLVM lowers fptrunc to bfloat to a
  // libgcc call that older toolchains lack, and packages must not need a runtime library.
  llvm::Value* float_to_bfloat(llvm::Value* v) {
    llvm::Type* i32 = b_.getInt32Ty();
    llvm::Type* i16 = b_.getInt16Ty();
    llvm::Type* bf = b_.getBFloatTy();
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) {
      i32 = llvm::VectorType::get(i32, vt->getElementCount());
      i16 = llvm::VectorType::get(i16, vt->getElementCount());
      bf = llvm::VectorType::get(bf, vt->getElementCount());
    }
    llvm::Value* bits = b_.CreateBitCast(v, i32);
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, llvm::ConstantInt::get(i32, 16)), llvm::ConstantInt::get(i32, 1));
    llvm::Value* rounded = b_.CreateAdd(bits, b_.CreateAdd(lsb, llvm::ConstantInt::get(i32, 0x7fff)));
    llvm::Value* nan = b_.CreateOr(bits, llvm::ConstantInt::get(i32, 0x400000));  // keep NaN quiet
    llvm::Value* pick = b_.CreateSelect(b_.CreateFCmpUNO(v, v), nan, rounded);
    return b_.CreateBitCast(b_.CreateTrunc(b_.CreateLShr(pick, llvm::ConstantInt::get(i32, 16)), i16), bf);
  }

  llvm::Value* to_mem(llvm::Value* v, DType t) {
    llvm::Type* m = mem_type(t);
    llvm::Type* target = m;
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) target = llvm::VectorType::get(m, vt->getElementCount());
    if (t == DType::BFloat16) return float_to_bfloat(v);
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

  llvm::Value* clamp_index(llvm::Value* idx, int64_t size) {
    llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSLT(idx, b_.getInt64(0)), b_.getInt64(0), idx);
    return b_.CreateSelect(b_.CreateICmpSGT(lo, b_.getInt64(static_cast<uint64_t>(size - 1))),
                           b_.getInt64(static_cast<uint64_t>(size - 1)), lo);
  }

  llvm::Value* scalar_load(const ExprNode* e, llvm::Value* idx, bool guarded) {
    const Buffer* buf = buffer_of(e->tensor.get());
    if (guarded) idx = clamp_index(idx, buf->size);
    llvm::Type* mt = mem_type(buf->dtype);
    llvm::Value* p = b_.CreateGEP(mt, buffer_base(e->tensor.get()), idx);
    llvm::Value* v = b_.CreateLoad(mt, p);
    if (buf->dtype == DType::Float16 || buf->dtype == DType::BFloat16) return b_.CreateFPExt(v, b_.getFloatTy());
    if (buf->dtype == DType::Bool) return b_.CreateICmpNE(v, llvm::ConstantInt::get(mt, 0));
    return v;
  }

  llvm::Value* emit_load(const ExprNode* e, bool guarded) {
    const Expr& index = e->args[0];
    if (!vec_var_) return scalar_load(e, emit_expr(index, false), guarded);
    auto coeff = linear_coeff(index.get(), vec_var_);
    if (coeff && *coeff == 0) return splat(scalar_load(e, scalar_index(index, 0), guarded));
    const Buffer* buf = buffer_of(e->tensor.get());
    llvm::Type* mt = mem_type(buf->dtype);
    llvm::Value* basep = buffer_base(e->tensor.get());
    auto* vt = llvm::VectorType::get(mt, static_cast<unsigned>(lanes_), false);
    auto contiguous = [&](llvm::Value* first) {
      llvm::Value* p = b_.CreateGEP(mt, basep, first);
      return b_.CreateAlignedLoad(vt, p, llvm::Align(dtype_size(buf->dtype)));
    };
    // Lanes at arbitrary (clamped, when guarded) indices: one hardware gather where the target has it.
    auto gather = [&]() -> llvm::Value* {
      llvm::Value* idx = emit_expr(index, false);
      if (guarded) {
        llvm::Value* lo = llvm::ConstantInt::get(idx->getType(), 0);
        llvm::Value* hi = llvm::ConstantInt::get(idx->getType(), static_cast<uint64_t>(buf->size - 1));
        idx = b_.CreateSelect(b_.CreateICmpSLT(idx, lo), lo, idx);
        idx = b_.CreateSelect(b_.CreateICmpSGT(idx, hi), hi, idx);
      }
      llvm::Value* ptrs = b_.CreateGEP(mt, basep, idx);
      return b_.CreateMaskedGather(vt, ptrs, llvm::Align(dtype_size(buf->dtype)));
    };
    if (coeff && *coeff == 1 && !guarded) return to_value(contiguous(scalar_index(index, 0)), buf->dtype);
    if (coeff && *coeff == 1) {
      // A guarded contiguous load (padding, slicing) is in bounds almost everywhere: load the vector
      // directly when all lanes are inside the buffer, gather clamped lanes only at the edges.
      llvm::Value* first = scalar_index(index, 0);
      llvm::Value* inside = b_.CreateAnd(
          b_.CreateICmpSGE(first, b_.getInt64(0)),
          b_.CreateICmpSLE(first, b_.getInt64(static_cast<uint64_t>(buf->size - lanes_))));
      auto* fast = llvm::BasicBlock::Create(ctx_, "load.fast", fn_);
      auto* slow = llvm::BasicBlock::Create(ctx_, "load.edge", fn_);
      auto* join = llvm::BasicBlock::Create(ctx_, "load.join", fn_);
      b_.CreateCondBr(inside, fast, slow);
      b_.SetInsertPoint(fast);
      llvm::Value* vf = contiguous(first);
      llvm::BasicBlock* fast_end = b_.GetInsertBlock();
      b_.CreateBr(join);
      b_.SetInsertPoint(slow);
      llvm::Value* vs = gather();
      llvm::BasicBlock* slow_end = b_.GetInsertBlock();
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
      llvm::PHINode* phi = b_.CreatePHI(vt, 2);
      phi->addIncoming(vf, fast_end);
      phi->addIncoming(vs, slow_end);
      return to_value(phi, buf->dtype);
    }
    return to_value(gather(), buf->dtype);
  }

  void emit_store(const Stmt& s) {
    const Buffer* buf = s->buffer.get();
    llvm::Value* value = emit_expr(s->value, false);
    llvm::Type* mt = mem_type(buf->dtype);
    llvm::Value* basep = base_of(buf);
    if (!vec_var_) {
      b_.CreateStore(to_mem(value, buf->dtype), b_.CreateGEP(mt, basep, emit_expr(s->index, false)));
      return;
    }
    auto coeff = linear_coeff(s->index.get(), vec_var_);
    if (coeff && *coeff == 1) {
      llvm::Value* p = b_.CreateGEP(mt, basep, scalar_index(s->index, 0));
      b_.CreateAlignedStore(to_mem(value, buf->dtype), p, llvm::Align(dtype_size(buf->dtype)));
      return;
    }
    for (int l = 0; l < lanes_; ++l) {
      llvm::Value* lane = b_.CreateExtractElement(value, static_cast<uint64_t>(l));
      b_.CreateStore(to_mem(lane, buf->dtype), b_.CreateGEP(mt, basep, scalar_index(s->index, l)));
    }
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
    if (e == vec_var_) {
      std::vector<llvm::Constant*> steps;
      for (int l = 0; l < lanes_; ++l) steps.push_back(b_.getInt64(static_cast<uint64_t>(l)));
      return b_.CreateAdd(splat(vec_base_), llvm::ConstantVector::get(steps));
    }
    auto it = vars_.find(e);
    if (it == vars_.end()) throw Error("codegen: unbound variable " + e->name + " in " + name_);
    return splat(it->second);
  }

  llvm::Value* emit_cast(llvm::Value* v, DType from, DType to) {
    llvm::Type* target = val_type_of(v, to);
    if (to == DType::Bool) {
      if (is_float(from)) return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
      return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    }
    if (is_float(to)) {
      llvm::Value* r;
      if (is_float(from)) r = b_.CreateFPCast(v, target);
      else if (from == DType::Bool || !is_signed(from)) r = b_.CreateUIToFP(v, target);
      else r = b_.CreateSIToFP(v, target);
      if (to == DType::Float16 || to == DType::BFloat16) {  // round through the narrow type
        if (to == DType::BFloat16) {
          r = b_.CreateFPExt(float_to_bfloat(r), target);
        } else {
          llvm::Type* narrow = b_.getHalfTy();
          if (auto* vt = llvm::dyn_cast<llvm::VectorType>(target)) narrow = llvm::VectorType::get(narrow, vt->getElementCount());
          r = b_.CreateFPExt(b_.CreateFPTrunc(r, narrow), target);
        }
      }
      return r;
    }
    if (is_float(from)) {
      // Saturating conversion: out-of-range values clamp instead of being undefined.
      auto id = is_signed(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
      if (!is_signed(to)) {
        // ONNX (and the reference) convert through int64 and wrap; emulate for unsigned targets.
        llvm::Type* i64 = val_type_of(v, DType::Int64);
        llvm::Value* wide = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, v->getType()}, {v});
        return b_.CreateTrunc(wide, target);
      }
      llvm::Type* i64 = val_type_of(v, DType::Int64);
      llvm::Value* wide = b_.CreateIntrinsic(id, {i64, v->getType()}, {v});
      return b_.CreateTrunc(wide, target);
    }
    bool src_signed = from != DType::Bool && is_signed(from);
    return b_.CreateIntCast(v, target, src_signed);
  }

  llvm::Value* intrinsic1(llvm::Intrinsic::ID id, llvm::Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

  llvm::Value* emit_unary(const ExprNode* e, llvm::Value* x) {
    DType t = e->args[0]->dtype;
    bool f = is_float(t);
    llvm::Type* ty = x->getType();
    auto libm_of = [&](const char* name, llvm::Value* arg) -> llvm::Value* {
      // float64 transcendental functions still call libm (float32 ones are inline: math_polynomials.h).
      llvm::Type* st = ty->getScalarType();
      std::string fname = std::string(name) + (st->isFloatTy() ? "f" : "");
      llvm::FunctionCallee callee = m_.getOrInsertFunction(fname, llvm::FunctionType::get(st, {st}, false));
      if (!ty->isVectorTy()) return b_.CreateCall(callee, {arg});
      llvm::Value* out = llvm::PoisonValue::get(ty);
      for (int l = 0; l < lanes_; ++l)
        out = b_.CreateInsertElement(out, b_.CreateCall(callee, {b_.CreateExtractElement(arg, static_cast<uint64_t>(l))}),
                                     static_cast<uint64_t>(l));
      return out;
    };
    auto libm = [&](const char* name) { return libm_of(name, x); };
    bool single = ty->getScalarType()->isFloatTy();
    switch (e->op) {
      case ExprOp::Neg: return f ? b_.CreateFNeg(x) : b_.CreateNeg(x);
      case ExprOp::Not: return b_.CreateNot(x);
      case ExprOp::BitNot: return b_.CreateNot(x);
      case ExprOp::Abs:
        if (f) return intrinsic1(llvm::Intrinsic::fabs, x);
        if (!is_signed(t)) return x;
        return b_.CreateSelect(b_.CreateICmpSLT(x, llvm::Constant::getNullValue(ty)), b_.CreateNeg(x), x);
      case ExprOp::Sqrt: return intrinsic1(llvm::Intrinsic::sqrt, x);
      case ExprOp::Floor: return intrinsic1(llvm::Intrinsic::floor, x);
      case ExprOp::Ceil: return intrinsic1(llvm::Intrinsic::ceil, x);
      case ExprOp::Round: return intrinsic1(llvm::Intrinsic::roundeven, x);
      case ExprOp::IsNaN: return b_.CreateFCmpUNO(x, x);
      case ExprOp::IsInf:
        return b_.CreateFCmpOEQ(intrinsic1(llvm::Intrinsic::fabs, x), llvm::ConstantFP::getInfinity(ty));
      case ExprOp::Exp: return single ? emit_exp(b_, x) : libm("exp");
      case ExprOp::Log: return single ? emit_log(b_, x) : libm("log");
      case ExprOp::Erf: return single ? emit_erf(b_, x) : libm("erf");
      case ExprOp::Tanh: return single ? emit_tanh(b_, x) : libm("tanh");
      case ExprOp::Sigmoid:
        if (single) return emit_sigmoid(b_, x);
        return b_.CreateFDiv(llvm::ConstantFP::get(ty, 1.0),
                             b_.CreateFAdd(llvm::ConstantFP::get(ty, 1.0), libm_of("exp", b_.CreateFNeg(x))));
      case ExprOp::Sin: return single ? emit_sin(b_, x) : libm("sin");
      case ExprOp::Cos: return single ? emit_cos(b_, x) : libm("cos");
      case ExprOp::Tan: return single ? emit_tan(b_, x) : libm("tan");
      case ExprOp::Asin: return single ? emit_asin(b_, x) : libm("asin");
      case ExprOp::Acos: return single ? emit_acos(b_, x) : libm("acos");
      case ExprOp::Atan: return single ? emit_atan(b_, x) : libm("atan");
      case ExprOp::Sinh: return single ? emit_sinh(b_, x) : libm("sinh");
      case ExprOp::Cosh: return single ? emit_cosh(b_, x) : libm("cosh");
      case ExprOp::Asinh: return single ? emit_asinh(b_, x) : libm("asinh");
      case ExprOp::Acosh: return single ? emit_acosh(b_, x) : libm("acosh");
      case ExprOp::Atanh: return single ? emit_atanh(b_, x) : libm("atanh");
      default: break;
    }
    throw Error(std::string("codegen: unary ") + te::expr_op_name(e->op));
  }

  llvm::Value* emit_binary(const ExprNode* e, llvm::Value* x, llvm::Value* y) {
    DType t = e->args[0]->dtype;
    llvm::Type* ty = x->getType();
    // float32 uses inline code (math_polynomials.h); float64 still lowers to libm fmod / pow.
    const bool single = ty->getScalarType()->isFloatTy();
    if (is_float(t)) {
      switch (e->op) {
        case ExprOp::Add: return b_.CreateFAdd(x, y);
        case ExprOp::Sub: return b_.CreateFSub(x, y);
        case ExprOp::Mul: return b_.CreateFMul(x, y);
        case ExprOp::Div: return b_.CreateFDiv(x, y);
        case ExprOp::Mod:
        case ExprOp::FMod: return single ? emit_fmod(b_, x, y) : b_.CreateFRem(x, y);
        case ExprOp::FloorDiv: return intrinsic1(llvm::Intrinsic::floor, b_.CreateFDiv(x, y));
        case ExprOp::FloorMod: {
          llvm::Value* r = single ? emit_fmod(b_, x, y) : b_.CreateFRem(x, y);
          llvm::Value* zero = llvm::Constant::getNullValue(ty);
          llvm::Value* fix = b_.CreateAnd(b_.CreateFCmpONE(r, zero),
                                          b_.CreateXor(b_.CreateFCmpOLT(r, zero), b_.CreateFCmpOLT(y, zero)));
          return b_.CreateSelect(fix, b_.CreateFAdd(r, y), r);
        }
        case ExprOp::Min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y);
        case ExprOp::Max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y);
        case ExprOp::Pow: return single ? emit_pow(b_, x, y) : b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y);
        case ExprOp::Eq: return b_.CreateFCmpOEQ(x, y);
        case ExprOp::Ne: return b_.CreateFCmpUNE(x, y);
        case ExprOp::Lt: return b_.CreateFCmpOLT(x, y);
        case ExprOp::Le: return b_.CreateFCmpOLE(x, y);
        case ExprOp::Gt: return b_.CreateFCmpOGT(x, y);
        case ExprOp::Ge: return b_.CreateFCmpOGE(x, y);
        default: break;
      }
      throw Error(std::string("codegen: float ") + te::expr_op_name(e->op));
    }
    const bool s = t != DType::Bool && is_signed(t);
    llvm::Value* zero = llvm::Constant::getNullValue(ty);
    llvm::Value* one = llvm::ConstantInt::get(ty, 1);
    switch (e->op) {
      case ExprOp::Add: return b_.CreateAdd(x, y);
      case ExprOp::Sub: return b_.CreateSub(x, y);
      case ExprOp::Mul: return b_.CreateMul(x, y);
      case ExprOp::Div:
      case ExprOp::Mod:
      case ExprOp::FloorDiv:
      case ExprOp::FloorMod: {
        // Division by zero and INT_MIN / -1 are undefined in LLVM: divide by 1 instead (the result for
        // a zero divisor is unspecified by ONNX; the reference rejects it).
        llvm::Value* bad = b_.CreateICmpEQ(y, zero);
        if (s) bad = b_.CreateOr(bad, b_.CreateICmpEQ(y, llvm::Constant::getAllOnesValue(ty)));
        llvm::Value* d = b_.CreateSelect(bad, one, y);
        llvm::Value* q = s ? b_.CreateSDiv(x, d) : b_.CreateUDiv(x, d);
        llvm::Value* r = s ? b_.CreateSRem(x, d) : b_.CreateURem(x, d);
        if (s) {  // y == -1: q = -x, r = 0
          llvm::Value* m1 = b_.CreateICmpEQ(y, llvm::Constant::getAllOnesValue(ty));
          q = b_.CreateSelect(m1, b_.CreateNeg(x), q);
          r = b_.CreateSelect(m1, zero, r);
        }
        if (e->op == ExprOp::Div) return q;
        if (e->op == ExprOp::Mod) return r;
        if (!s) return e->op == ExprOp::FloorDiv ? q : r;
        llvm::Value* fix = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                        b_.CreateXor(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(y, zero)));
        if (e->op == ExprOp::FloorDiv) return b_.CreateSelect(fix, b_.CreateSub(q, one), q);
        return b_.CreateSelect(fix, b_.CreateAdd(r, y), r);
      }
      case ExprOp::Min: return b_.CreateSelect(s ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y), x, y);
      case ExprOp::Max: return b_.CreateSelect(s ? b_.CreateICmpSGT(x, y) : b_.CreateICmpUGT(x, y), x, y);
      case ExprOp::And: return b_.CreateAnd(x, y);
      case ExprOp::Or: return b_.CreateOr(x, y);
      case ExprOp::Xor: return b_.CreateXor(x, y);
      case ExprOp::BitAnd: return b_.CreateAnd(x, y);
      case ExprOp::BitOr: return b_.CreateOr(x, y);
      case ExprOp::BitXor: return b_.CreateXor(x, y);
      case ExprOp::Shl:
      case ExprOp::Shr: {
        unsigned bits = ty->getScalarSizeInBits();
        llvm::Value* big = b_.CreateICmpUGE(y, llvm::ConstantInt::get(ty, bits));
        llvm::Value* amount = b_.CreateSelect(big, zero, y);
        llvm::Value* r = e->op == ExprOp::Shl ? b_.CreateShl(x, amount) : b_.CreateLShr(x, amount);
        return b_.CreateSelect(big, zero, r);
      }
      case ExprOp::Eq: return b_.CreateICmpEQ(x, y);
      case ExprOp::Ne: return b_.CreateICmpNE(x, y);
      case ExprOp::Lt: return s ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
      case ExprOp::Le: return s ? b_.CreateICmpSLE(x, y) : b_.CreateICmpULE(x, y);
      case ExprOp::Gt: return s ? b_.CreateICmpSGT(x, y) : b_.CreateICmpUGT(x, y);
      case ExprOp::Ge: return s ? b_.CreateICmpSGE(x, y) : b_.CreateICmpUGE(x, y);
      case ExprOp::Pow: {
        // Square-and-multiply over every exponent bit, branch-free so it vectorizes; a negative
        // exponent gives 1 / base^-e truncated: 1 for base 1, +-1 for base -1, else 0.
        unsigned bits = ty->getScalarSizeInBits();
        llvm::Value* result = one;
        llvm::Value* base = x;
        for (unsigned k = 0; k < bits; ++k) {
          llvm::Value* bit = b_.CreateAnd(b_.CreateLShr(y, llvm::ConstantInt::get(ty, k)), one);
          result = b_.CreateSelect(b_.CreateICmpNE(bit, zero), b_.CreateMul(result, base), result);
          base = b_.CreateMul(base, base);
        }
        if (!s) return result;
        llvm::Value* minus_one = llvm::Constant::getAllOnesValue(ty);
        llvm::Value* odd = b_.CreateICmpNE(b_.CreateAnd(y, one), zero);
        llvm::Value* negative = b_.CreateSelect(b_.CreateICmpEQ(x, one), one,
                                                b_.CreateSelect(b_.CreateICmpEQ(x, minus_one),
                                                                b_.CreateSelect(odd, minus_one, one), zero));
        return b_.CreateSelect(b_.CreateICmpSLT(y, zero), negative, result);
      }
      default: break;
    }
    throw Error(std::string("codegen: integer ") + te::expr_op_name(e->op));
  }

  llvm::Value* emit_expr(const Expr& expr, bool guarded) {
    const ExprNode* e = expr.get();
    switch (e->op) {
      case ExprOp::IntImm:
      case ExprOp::FloatImm: return constant(e);
      case ExprOp::Var: return emit_var(e);
      case ExprOp::Load: return emit_load(e, guarded);
      case ExprOp::Cast: return emit_cast(emit_expr(e->args[0], guarded), e->args[0]->dtype, e->dtype);
      case ExprOp::Select: {
        // Both branches are evaluated (LLVM select): loads under them are clamped into their buffer.
        llvm::Value* c = emit_expr(e->args[0], guarded);
        llvm::Value* a = emit_expr(e->args[1], true);
        llvm::Value* b = emit_expr(e->args[2], true);
        return b_.CreateSelect(c, a, b);
      }
      default: break;
    }
    if (te::is_unary(e->op)) return emit_unary(e, emit_expr(e->args[0], guarded));
    bool logic = e->op == ExprOp::And || e->op == ExprOp::Or;
    llvm::Value* x = emit_expr(e->args[0], guarded);
    llvm::Value* y = emit_expr(e->args[1], guarded || logic);
    return emit_binary(e, x, y);
  }

  // ---- statements --------------------------------------------------------------------------------
  // for (v = lo; v < hi; v += step) body(v)
  template <typename Body>
  void counted_loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::string& name, Body body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, name + ".head", fn_);
    auto* loop = llvm::BasicBlock::Create(ctx_, name + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* v = b_.CreatePHI(b_.getInt64Ty(), 2, name);
    v->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(v, hi), loop, exit);
    b_.SetInsertPoint(loop);
    body(v);
    llvm::Value* next = b_.CreateAdd(v, b_.getInt64(static_cast<uint64_t>(step)));
    v->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
  }

  void emit_for(const Stmt& s) {
    const ExprNode* var = s->var.get();
    if (s->for_kind == ForKind::Parallel && !vec_var_ && s->extent > 1) return emit_parallel(s);
    if (s->for_kind == ForKind::Vectorized && !vec_var_) {
      int lanes = lanes_for(dtype_of_body(s->body[0]));
      int64_t main = s->extent / lanes * lanes;
      if (lanes > 1 && main == s->extent && s->extent <= 4 * static_cast<int64_t>(lanes)) {
        // A short vectorized loop (a register tile's row): straight-line vector code, so the local
        // accumulator indices are constants and SROA keeps the tile in registers.
        for (int64_t base = 0; base < s->extent; base += lanes) {
          vec_var_ = var;
          vec_base_ = b_.getInt64(static_cast<uint64_t>(base));
          lanes_ = lanes;
          emit_stmt(s->body[0]);
          vec_var_ = nullptr;
        }
        return;
      }
      if (lanes > 1 && main > 0) {
        counted_loop(b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(main)), lanes, var->name + ".vec",
                     [&](llvm::Value* v) {
                       vec_var_ = var;
                       vec_base_ = v;
                       lanes_ = lanes;
                       emit_stmt(s->body[0]);
                       vec_var_ = nullptr;
                     });
      }
      counted_loop(b_.getInt64(static_cast<uint64_t>(lanes > 1 ? main : 0)), b_.getInt64(static_cast<uint64_t>(s->extent)), 1,
                   var->name + ".tail", [&](llvm::Value* v) {
                     vars_[var] = v;
                     emit_stmt(s->body[0]);
                     vars_.erase(var);
                   });
      return;
    }
    if (s->for_kind == ForKind::Unrolled && s->extent <= 16) {
      // Fully unrolled: the body once per iteration with the variable bound to a constant.
      for (int64_t i = 0; i < s->extent; ++i) {
        vars_[var] = b_.getInt64(static_cast<uint64_t>(i));
        emit_stmt(s->body[0]);
      }
      vars_.erase(var);
      return;
    }
    counted_loop(b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(s->extent)), 1, var->name, [&](llvm::Value* v) {
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

  void emit_stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::For: emit_for(s); return;
      case StmtKind::Store: emit_store(s); return;
      case StmtKind::Allocate: {
        llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
        auto* arr = llvm::ArrayType::get(mem_type(s->buffer->dtype), static_cast<uint64_t>(s->buffer->size));
        llvm::AllocaInst* a = entry.CreateAlloca(arr, nullptr, s->buffer->name);
        a->setAlignment(llvm::Align(64));
        base_[s->buffer.get()] = a;
        node_to_buf_[s->buffer->node.get()] = s->buffer.get();
        emit_stmt(s->body[0]);
        base_.erase(s->buffer.get());
        node_to_buf_.erase(s->buffer->node.get());
        return;
      }
      case StmtKind::IfThenElse: {
        llvm::Value* c = emit_expr(s->cond, false);
        if (vec_var_) throw Unsupported("codegen: if inside a vectorized loop");
        auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
        auto* else_bb = llvm::BasicBlock::Create(ctx_, "else", fn_);
        auto* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
        b_.CreateCondBr(c, then_bb, else_bb);
        b_.SetInsertPoint(then_bb);
        emit_stmt(s->body[0]);
        b_.CreateBr(done);
        b_.SetInsertPoint(else_bb);
        emit_stmt(s->body[1]);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        return;
      }
      case StmtKind::Block:
        for (const Stmt& b : s->body) emit_stmt(b);
        return;
      case StmtKind::ExternCall:
        if (vec_var_) throw Error("codegen: extern call inside a vectorized loop");
        emit_extern_call(s);
        return;
    }
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
  std::unordered_map<const Buffer*, size_t> param_index_;
  std::unordered_map<const te::TensorNode*, const Buffer*> node_to_buf_;
  std::unordered_map<const ExprNode*, llvm::Value*> vars_;
  const ExprNode* vec_var_ = nullptr;
  llvm::Value* vec_base_ = nullptr;
  int lanes_ = 1;
  int outlined_ = 0;
};

// A parallel loop: its body becomes `void task(closure*, i64 index)`; the closure carries the buffer
// array, the parallel hook and the enclosing loop variables. The hook runs the tasks (or, without
// one, a serial loop does).
void FuncEmitter::emit_parallel(const Stmt& s) {
  auto* ptr = llvm::PointerType::get(ctx_, 0);
  auto* i64 = b_.getInt64Ty();
  for (const auto& [buf, p] : base_)
    if (buf->local) throw Unsupported("codegen: local buffer '" + buf->name + "' crosses a parallel loop");
  // Bind the task's buffers from the closure's array, like the enclosing function's.
  std::vector<const ExprNode*> captured;
  for (const auto& [v, val] : vars_) captured.push_back(v);
  std::vector<llvm::Type*> fields = {ptr, ptr};
  for (size_t i = 0; i < captured.size(); ++i) fields.push_back(i64);
  auto* closure_ty = llvm::StructType::get(ctx_, fields);

  // The task function.
  auto* task_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64}, false);
  auto* task = llvm::Function::Create(task_ty, llvm::Function::InternalLinkage,
                                      name_ + ".task" + std::to_string(outlined_++), m_);
  task->addFnAttr(llvm::Attribute::NoUnwind);
  {
    FuncEmitter inner(m_, opts_, params_);
    inner.fn_ = task;
    inner.name_ = task->getName().str();
    inner.outlined_ = 0;
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", task);
    inner.b_.SetInsertPoint(entry);
    llvm::Value* cl = task->getArg(0);
    inner.buffers_arg_ = inner.b_.CreateLoad(ptr, inner.b_.CreateStructGEP(closure_ty, cl, 0));
    inner.parallel_arg_ = inner.b_.CreateLoad(ptr, inner.b_.CreateStructGEP(closure_ty, cl, 1));
    inner.bind_params();
    for (size_t i = 0; i < captured.size(); ++i)
      inner.vars_[captured[i]] = inner.b_.CreateLoad(i64, inner.b_.CreateStructGEP(closure_ty, cl, static_cast<unsigned>(2 + i)));
    inner.vars_[s->var.get()] = task->getArg(1);
    inner.emit_stmt(s->body[0]);
    inner.b_.CreateRetVoid();
    outlined_ += 1000 * inner.outlined_;  // keep nested task names unique
  }

  // The call site.
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst* closure = entry.CreateAlloca(closure_ty);
  b_.CreateStore(buffers_arg_, b_.CreateStructGEP(closure_ty, closure, 0));
  b_.CreateStore(parallel_arg_, b_.CreateStructGEP(closure_ty, closure, 1));
  for (size_t i = 0; i < captured.size(); ++i)
    b_.CreateStore(vars_.at(captured[i]), b_.CreateStructGEP(closure_ty, closure, static_cast<unsigned>(2 + i)));
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

}  // namespace

void emit_functions(const std::vector<lower::LoweredFunc>& funcs, const CodegenOptions& opts, llvm::Module& module) {
  for (const auto& f : funcs) {
    FuncEmitter fe(module, opts, f.params);
    llvm::Function* fn = fe.emit(f);
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyFunction(*fn, &os)) throw Error("codegen: invalid LLVM IR for " + f.name + ": " + os.str());
  }
}

}  // namespace kiln::llvm_backend
