#include "backends/llvm/emit_object.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
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

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "backends/llvm/expand_roundeven.h"
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

// Direct callees of each function defined in `m`; "" stands for an indirect call. Intrinsics that stay
// instructions are left out; those that may become library calls (memcpy, memset, memmove) are kept
// under their library name.
std::map<std::string, std::set<std::string>> direct_calls(const llvm::Module& m) {
  std::map<std::string, std::set<std::string>> calls;
  for (const llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    std::set<std::string>& callees = calls[f.getName().str()];
    for (const llvm::BasicBlock& bb : f)
      for (const llvm::Instruction& inst : bb) {
        const auto* call = llvm::dyn_cast<llvm::CallBase>(&inst);
        if (!call || call->isInlineAsm()) continue;
        // A function passed as an argument may be called by the callee (a parallel loop's task, run
        // by the context's parallel_for): its frame counts as the callee's.
        for (const llvm::Use& arg : call->args())
          if (const auto* passed = llvm::dyn_cast<llvm::Function>(arg->stripPointerCasts()))
            if (!passed->isDeclaration()) callees.insert(passed->getName().str());
        const llvm::Function* callee = call->getCalledFunction();
        if (!callee) {
          callees.insert("");
        } else if (callee->isIntrinsic()) {
          const llvm::Intrinsic::ID id = callee->getIntrinsicID();
          if (id == llvm::Intrinsic::memcpy) callees.insert("memcpy");
          else if (id == llvm::Intrinsic::memset) callees.insert("memset");
          else if (id == llvm::Intrinsic::memmove) callees.insert("memmove");
        } else {
          callees.insert(callee->getName().str());
        }
      }
  }
  return calls;
}

// The frames LLVM wrote to its stack-usage file: lines "<module>:<function>\t<bytes>\t<static|dynamic...>".
std::map<std::string, std::pair<int64_t, bool>> read_stack_usage(const std::string& path) {
  std::map<std::string, std::pair<int64_t, bool>> frames;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t'), tab2 = line.find('\t', tab + 1);
    if (tab == std::string::npos || tab2 == std::string::npos) continue;
    const std::string where = line.substr(0, tab);
    const std::string fn = where.substr(where.rfind(':') + 1);
    frames[fn] = {std::stoll(line.substr(tab + 1, tab2 - tab - 1)), line.find("dynamic", tab2) != std::string::npos};
  }
  return frames;
}

StackEstimate deepest_stack(const llvm::Module& m, const std::map<std::string, std::set<std::string>>& calls,
                            const std::map<std::string, std::pair<int64_t, bool>>& frames) {
  StackEstimate est;
  std::set<std::string> not_counted;
  std::map<std::string, int64_t> memo;
  std::function<int64_t(const std::string&, int)> depth = [&](const std::string& fn, int level) -> int64_t {
    if (auto it = memo.find(fn); it != memo.end()) return it->second;
    auto callees = calls.find(fn);
    auto frame = frames.find(fn);
    if (callees == calls.end() || frame == frames.end() || level > 64) {  // outside the module (or no frame)
      not_counted.insert(fn.empty() ? "indirect calls (the context's parallel_for)" : fn);
      return 0;
    }
    est.dynamic |= frame->second.second;
    int64_t deepest = 0;
    for (const std::string& c : callees->second) deepest = std::max(deepest, depth(c, level + 1));
    return memo[fn] = frame->second.first + deepest;
  };
  for (const llvm::Function& f : m)
    if (!f.isDeclaration() && !f.hasLocalLinkage()) est.bytes = std::max(est.bytes, depth(f.getName().str(), 0));
  est.not_counted.assign(not_counted.begin(), not_counted.end());
  return est;
}

// Runs LLVM's O3 pipeline on `m`, then instruction selection and emission of `type` into `out`.
void optimize_and_emit(llvm::Module& m, llvm::TargetMachine& tm, llvm::raw_pwrite_stream& out, llvm::CodeGenFileType type,
                       StackEstimate* stack = nullptr, const std::string& stack_usage_file = "") {
  // Function attributes make the optimiser and instruction selection use the target's features.
  for (llvm::Function& f : m)
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", tm.getTargetCPU());
      if (!tm.getTargetFeatureString().empty()) f.addFnAttr("target-features", tm.getTargetFeatureString());
    }
  expand_roundeven_without_instruction(m, tm);
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

  // Codegen inlines nothing, so the optimised module's calls are the object's.
  std::map<std::string, std::set<std::string>> calls;
  if (stack) {
    calls = direct_calls(m);
    tm.Options.StackUsageOutput = stack_usage_file;
  }
  {
    llvm::legacy::PassManager pm;  // its AsmPrinter writes (and closes) the stack-usage file
    if (tm.addPassesToEmitFile(pm, out, nullptr, type))
      throw Error("target cannot emit " + std::string(type == llvm::CodeGenFileType::ObjectFile ? "object" : "assembly") +
                  " files: " + tm.getTargetTriple().str());
    pm.run(m);
  }
  if (stack) {
    tm.Options.StackUsageOutput.clear();
    *stack = deepest_stack(m, calls, read_stack_usage(stack_usage_file));
    std::error_code ec;
    std::filesystem::remove(stack_usage_file, ec);
  }
}

}  // namespace

void emit_object(llvm::Module& m, llvm::TargetMachine& tm, const std::string& path, StackEstimate* stack) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) throw Error(path + ": cannot write object file: " + ec.message());
  optimize_and_emit(m, tm, out, llvm::CodeGenFileType::ObjectFile, stack, path + ".su");
  out.flush();
}

std::string emit_assembly(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream out(text);
  optimize_and_emit(m, tm, out, llvm::CodeGenFileType::AssemblyFile);
  return std::string(text.str());
}

}  // namespace kiln::llvm_backend
