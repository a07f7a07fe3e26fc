#include "backends/llvm/emit_object.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/PassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Triple.h>

#include <mutex>

#include "frontend/ir/error.h"

namespace kiln::llvm_backend {

MachineSpec machine_of(const Target& t) { return {t.triple, t.cpu, t.features, t.fused_multiply_add}; }

std::unique_ptr<llvm::TargetMachine> make_target_machine(const MachineSpec& spec) {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(spec.triple, err);
  if (!target) throw Error("target triple '" + spec.triple + "': " + err);
  llvm::TargetOptions options;
  // Fast lets instruction selection fuse any fmul feeding an fadd; the IR keeps no contract flags.
  options.AllowFPOpFusion = spec.fused_multiply_add ? llvm::FPOpFusion::Fast : llvm::FPOpFusion::Standard;
  // Normalized as llc and clang do: a three-part triple such as thumbv7em-none-eabihf read as written
  // has "eabihf" as its OS and no environment, so LLVM chose the soft-float ABI for it.
  const llvm::Triple triple(llvm::Triple::normalize(spec.triple));
  // Position-independent code for OSes (packages link into PIEs and shared objects); bare metal (no OS
  // in the triple: Cortex-M) links at fixed addresses, where PIC would only cost GOT loads.
  const bool bare_metal = triple.getOS() == llvm::Triple::UnknownOS && triple.isOSBinFormatELF();
  auto* tm = target->createTargetMachine(triple.str(), spec.cpu, spec.features, options,
                                         bare_metal ? llvm::Reloc::Static : llvm::Reloc::PIC_,
                                         std::nullopt, llvm::CodeGenOptLevel::Aggressive);
  if (!tm) throw Error("cannot create a target machine for " + spec.triple + " / " + spec.cpu);
  return std::unique_ptr<llvm::TargetMachine>(tm);
}

void configure_module(llvm::Module& m, llvm::TargetMachine& tm) {
  m.setTargetTriple(tm.getTargetTriple().str());
  m.setDataLayout(tm.createDataLayout());
}

namespace {

// Runs LLVM's O3 pipeline on `m`, then instruction selection and emission of `type` into `out`.
void optimize_and_emit(llvm::Module& m, llvm::TargetMachine& tm, llvm::raw_pwrite_stream& out, llvm::CodeGenFileType type) {
  // Function attributes make the optimiser and instruction selection use the target's features.
  for (llvm::Function& f : m)
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", tm.getTargetCPU());
      if (!tm.getTargetFeatureString().empty()) f.addFnAttr("target-features", tm.getTargetFeatureString());
    }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);

  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, out, nullptr, type))
    throw Error("target cannot emit " + std::string(type == llvm::CodeGenFileType::ObjectFile ? "object" : "assembly") +
                " files: " + tm.getTargetTriple().str());
  pm.run(m);
}

}  // namespace

void emit_object(llvm::Module& m, llvm::TargetMachine& tm, const std::string& path) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) throw Error(path + ": cannot write object file: " + ec.message());
  optimize_and_emit(m, tm, out, llvm::CodeGenFileType::ObjectFile);
  out.flush();
}

std::string emit_assembly(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream out(text);
  optimize_and_emit(m, tm, out, llvm::CodeGenFileType::AssemblyFile);
  return std::string(text.str());
}

}  // namespace kiln::llvm_backend
