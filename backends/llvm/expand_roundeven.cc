#include "backends/llvm/expand_roundeven.h"

#include <llvm/CodeGen/TargetLowering.h>
#include <llvm/CodeGen/TargetSubtargetInfo.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>

#include <cmath>
#include <vector>

namespace kiln::llvm_backend {

int expand_roundeven_without_instruction(llvm::Module& m, llvm::TargetMachine& tm) {
  int replaced = 0;
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    const llvm::TargetLowering* lowering = tm.getSubtargetImpl(f)->getTargetLowering();
    const llvm::DataLayout& dl = m.getDataLayout();
    std::vector<llvm::IntrinsicInst*> calls;
    for (llvm::Instruction& i : llvm::instructions(f))
      if (auto* c = llvm::dyn_cast<llvm::IntrinsicInst>(&i); c && c->getIntrinsicID() == llvm::Intrinsic::roundeven) calls.push_back(c);
    for (llvm::IntrinsicInst* c : calls) {
      llvm::Type* t = c->getType();
      llvm::Type* scalar = t->getScalarType();
      if (!scalar->isFloatTy() && !scalar->isDoubleTy()) continue;
      // The type instruction selection computes in: a vector wider than the registers is split.
      llvm::EVT vt = lowering->getValueType(dl, t);
      while (vt.isVector() && !lowering->isTypeLegal(vt) && vt.getVectorNumElements() > 1)
        vt = vt.getHalfNumVectorElementsVT(m.getContext());
      // Legal only: where LLVM 19 calls roundevenf (x86-64 without SSE4.1, the M4 and M7) it is Expand.
      if (lowering->isOperationLegal(llvm::ISD::FROUNDEVEN, vt)) continue;
      llvm::IRBuilder<> b(c);
      llvm::Value* x = c->getArgOperand(0);
      // Rounding in the current mode, which is to nearest even (the M7's VRINTR; LLVM 19 selects no
      // VRINTN for roundeven there).
      if (lowering->isOperationLegal(llvm::ISD::FNEARBYINT, vt)) {
        c->replaceAllUsesWith(b.CreateUnaryIntrinsic(llvm::Intrinsic::nearbyint, x));
        c->eraseFromParent();
        ++replaced;
        continue;
      }
      // Only where the float addition itself is an instruction (not a soft-float call).
      if (!lowering->isOperationLegalOrCustom(llvm::ISD::FADD, lowering->getValueType(dl, scalar))) continue;
      const double big = std::ldexp(1.0, scalar->isFloatTy() ? 23 : 52);
      llvm::Constant* k = llvm::ConstantFP::get(t, big);
      llvm::Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      llvm::Value* rounded = b.CreateFSub(b.CreateFAdd(ax, k), k);
      llvm::Value* signed_rounded = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, rounded, x);
      // Unordered-false for NaN: NaN, infinities and large values keep x.
      c->replaceAllUsesWith(b.CreateSelect(b.CreateFCmpOLT(ax, k), signed_rounded, x));
      c->eraseFromParent();
      ++replaced;
    }
  }
  return replaced;
}

}  // namespace kiln::llvm_backend
