#include "backends/llvm/jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

#include <mutex>

#include "backends/llvm/codegen.h"
#include "frontend/ir/error.h"

namespace kiln::llvm_backend {

struct JitFunction::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  void (*fn)(void**, void*) = nullptr;
};

namespace {

template <typename T>
T unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) throw Error(std::string("jit: ") + what + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

void optimize_module(llvm::Module& m, llvm::TargetMachine* tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

}  // namespace

JitFunction::JitFunction(const lower::LoweredFunc& f, bool optimize) : impl_(std::make_unique<Impl>()) {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "host");
  jtmb.setCodeGenOptLevel(optimize ? llvm::CodeGenOptLevel::Aggressive : llvm::CodeGenOptLevel::None);
  auto tm = unwrap(jtmb.createTargetMachine(), "target machine");
  impl_->jit = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(), "create");
  auto gen = unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                        impl_->jit->getDataLayout().getGlobalPrefix()),
                    "process symbols");
  impl_->jit->getMainJITDylib().addGenerator(std::move(gen));

  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = std::make_unique<llvm::Module>(f.name, *ctx);
  mod->setDataLayout(impl_->jit->getDataLayout());
  mod->setTargetTriple(tm->getTargetTriple().str());
  // Vector width from the host's features: 512 bits with AVX-512, else 256 with AVX, else 128.
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  int bits = features.lookup("avx512f") ? 512 : features.lookup("avx") ? 256 : 128;
  emit_functions({f}, codegen_options(bits, jit_host_features()), *mod);
  std::string cpu = llvm::sys::getHostCPUName().str();
  for (llvm::Function& fn : *mod) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", cpu);
    fn.addFnAttr("target-features", tm->getTargetFeatureString());
  }
  if (optimize) optimize_module(*mod, tm.get());
  if (auto err = impl_->jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(mod), std::move(ctx))))
    throw Error("jit: add module: " + llvm::toString(std::move(err)));
  auto addr = unwrap(impl_->jit->lookup(f.name), "lookup");
  impl_->fn = addr.toPtr<void (*)(void**, void*)>();
}

std::string jit_host_features() {
  std::string out;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.getValue()) out += (out.empty() ? "+" : ",+") + f.getKey().str();
  return out;
}

JitFunction::~JitFunction() = default;

void JitFunction::run(const std::vector<void*>& buffers, void* parallel) const {
  impl_->fn(const_cast<void**>(buffers.data()), parallel);
}

}  // namespace kiln::llvm_backend
