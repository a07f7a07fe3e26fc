#include "backends/package/entry_function.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace kiln::package {

void emit_entry_functions(llvm::Module& mod, const std::string& m, const std::vector<Slot>& slots, size_t num_inputs,
                          size_t num_outputs, bool needs_workspace, int64_t workspace_align, llvm::Function* kernel) {
  llvm::LLVMContext& ctx = mod.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* ptr = llvm::PointerType::get(ctx, 0);
  auto* i32 = b.getInt32Ty();
  auto* run_ty = llvm::FunctionType::get(i32, {ptr, ptr, ptr, ptr}, false);
  auto* run = llvm::Function::Create(run_ty, llvm::Function::ExternalLinkage, m + "_run", mod);
  run->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Value* c = run->getArg(0);
  llvm::Value* in = run->getArg(1);
  llvm::Value* out = run->getArg(2);
  llvm::Value* ws = run->getArg(3);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", run);
  auto* bad = llvm::BasicBlock::Create(ctx, "null_argument", run);
  auto* misaligned = llvm::BasicBlock::Create(ctx, "misaligned", run);
  auto* check_align = llvm::BasicBlock::Create(ctx, "check_align", run);
  auto* body = llvm::BasicBlock::Create(ctx, "run", run);
  b.SetInsertPoint(entry);
  llvm::Value* null_arg = b.CreateOr(b.CreateIsNull(in), b.CreateIsNull(out));
  if (needs_workspace) null_arg = b.CreateOr(null_arg, b.CreateIsNull(ws));
  b.CreateCondBr(null_arg, bad, check_align);
  b.SetInsertPoint(bad);
  b.CreateRet(b.getInt32(1));
  b.SetInsertPoint(check_align);
  llvm::Value* low = b.CreateAnd(b.CreatePtrToInt(ws, b.getInt64Ty()), b.getInt64(static_cast<uint64_t>(workspace_align - 1)));
  b.CreateCondBr(b.CreateICmpNE(low, b.getInt64(0)), misaligned, body);
  b.SetInsertPoint(misaligned);
  b.CreateRet(b.getInt32(2));
  b.SetInsertPoint(body);
  auto* arr = llvm::ArrayType::get(ptr, slots.size());
  // In the entry block: an alloca anywhere else has a run-time frame (a dynamic stack adjustment, and
  // no static stack size for the memory report).
  llvm::Value* bufs = llvm::IRBuilder<>(entry, entry->begin()).CreateAlloca(arr);
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    llvm::Value* p = nullptr;
    switch (s.kind) {
      case Slot::Input: p = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, in, static_cast<uint64_t>(s.index))); break;
      case Slot::Output: p = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, out, static_cast<uint64_t>(s.index))); break;
      case Slot::Weight: p = s.weight; break;
      case Slot::Workspace: p = b.CreateConstGEP1_64(b.getInt8Ty(), ws, static_cast<uint64_t>(s.index)); break;
    }
    b.CreateStore(p, b.CreateConstGEP2_64(arr, bufs, 0, i));
  }
  b.CreateCall(kernel, {bufs, c});
  b.CreateRet(b.getInt32(0));

  auto* argv_ty = llvm::FunctionType::get(i32, {ptr}, false);
  auto* argv = llvm::Function::Create(argv_ty, llvm::Function::ExternalLinkage, m + "_run_argv", mod);
  auto* e2 = llvm::BasicBlock::Create(ctx, "entry", argv);
  b.SetInsertPoint(e2);
  llvm::Value* args = argv->getArg(0);
  llvm::Value* ws2 = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, args, num_inputs + num_outputs));
  llvm::Value* outp = b.CreateConstGEP1_64(ptr, args, num_inputs);
  b.CreateRet(b.CreateCall(run, {llvm::ConstantPointerNull::get(ptr), args, outp, ws2}));
}

}  // namespace kiln::package
