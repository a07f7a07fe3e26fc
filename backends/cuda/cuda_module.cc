#include "backends/cuda/cuda_module.h"

#include <algorithm>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Target/TargetMachine.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>

#include "backends/cuda/cuda_toolkit.h"
#include "backends/package/c_compiler.h"
#include "backends/package/file_io.h"
#include "frontend/ir/error.h"

namespace kiln::cuda {

lower::GpuScheduleParams gpu_schedule_for(int multiprocessors, const GpuLimits& limits) {
  lower::GpuScheduleParams gp;
  gp.threads_per_block = std::min(gp.threads_per_block, limits.max_threads_per_block);
  gp.min_threads = int64_t{multiprocessors} * 1024;
  gp.multiprocessors = multiprocessors;
  gp.tuned_shared_bytes = limits.shared_memory_bytes;
  return gp;
}
namespace fs = std::filesystem;

namespace {

// LLVM intrinsics that NVPTX cannot select (float64 pow, for one, is an intrinsic in the loop IR's
// code) become calls of their libm names, which link_libdevice then resolves like the others.
void intrinsics_to_calls(llvm::Module& m) {
  std::vector<llvm::IntrinsicInst*> found;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        if (auto* ii = llvm::dyn_cast<llvm::IntrinsicInst>(&i)) found.push_back(ii);
  for (llvm::IntrinsicInst* ii : found) {
    const char* base = nullptr;
    switch (ii->getIntrinsicID()) {
      case llvm::Intrinsic::pow: base = "pow"; break;
      case llvm::Intrinsic::exp: base = "exp"; break;
      case llvm::Intrinsic::exp2: base = "exp2"; break;
      case llvm::Intrinsic::log: base = "log"; break;
      case llvm::Intrinsic::log2: base = "log2"; break;
      case llvm::Intrinsic::log10: base = "log10"; break;
      case llvm::Intrinsic::sin: base = "sin"; break;
      case llvm::Intrinsic::cos: base = "cos"; break;
      default: continue;
    }
    llvm::Type* t = ii->getType();
    if (t->isVectorTy()) throw Error(std::string("GPU code generation: a vector ") + base + " (GPU programs are scalar)");
    const std::string name = std::string(base) + (t->isFloatTy() ? "f" : "");
    std::vector<llvm::Type*> params;
    std::vector<llvm::Value*> args;
    for (llvm::Value* a : ii->args()) {
      params.push_back(a->getType());
      args.push_back(a);
    }
    llvm::FunctionCallee callee = m.getOrInsertFunction(name, llvm::FunctionType::get(t, params, false));
    llvm::IRBuilder<> b(ii);
    ii->replaceAllUsesWith(b.CreateCall(callee, args));
    ii->eraseFromParent();
  }
}

// Float64 transcendental functions are calls of libm names (backends/llvm/expr_ops.cc); on the GPU
// they are libdevice's __nv_ functions, linked in and inlined by the optimiser.
void link_libdevice(llvm::Module& m) {
  intrinsics_to_calls(m);
  std::vector<llvm::Function*> calls;
  for (llvm::Function& f : m)
    if (f.isDeclaration() && !f.isIntrinsic() && !f.use_empty()) calls.push_back(&f);
  if (calls.empty()) return;
  const std::string path = cuda_root() + "/nvvm/libdevice/libdevice.10.bc";
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> lib = llvm::parseIRFile(path, diag, m.getContext());
  if (!lib) throw Error(path + ": cannot read libdevice (" + diag.getMessage().str() + "), which the float64 function " +
                        calls.front()->getName().str() + " needs on the GPU");
  lib->setTargetTriple(m.getTargetTriple());
  lib->setDataLayout(m.getDataLayout());
  for (llvm::Function* f : calls) {
    const std::string name = "__nv_" + f->getName().str();
    if (!lib->getFunction(name)) throw Error("GPU code generation: no GPU version of " + f->getName().str() + " in libdevice");
    llvm::FunctionCallee nv = m.getOrInsertFunction(name, f->getFunctionType());
    f->replaceAllUsesWith(nv.getCallee());
    f->eraseFromParent();
  }
  if (llvm::Linker::linkModules(m, std::move(lib), llvm::Linker::LinkOnlyNeeded))
    throw Error("GPU code generation: cannot link libdevice");
  // Only the kernels are entry points: everything libdevice brought in may be inlined and dropped.
  for (llvm::Function& f : m)
    if (!f.isDeclaration() && f.getName().starts_with("__nv_")) f.setLinkage(llvm::GlobalValue::InternalLinkage);
}

fs::path fresh_dir() {
  fs::path d = fs::temp_directory_path() / ("kiln-ptxas-" + std::to_string(std::random_device{}()));
  fs::create_directories(d);
  return d;
}

}  // namespace

std::string assemble_ptx(const std::string& ptx, const std::string& arch) {
  const fs::path dir = fresh_dir();
  const fs::path in = dir / "kernels.ptx", out = dir / "kernels.cubin", log = dir / "ptxas.log";
  package::write_file(in, ptx);
  const std::string cmd = package::shell_quote(ptxas_path()) + " -arch=" + package::shell_quote(arch) + " -O3 " +
                          package::shell_quote(in.string()) + " -o " + package::shell_quote(out.string()) + " >" +
                          package::shell_quote(log.string()) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string cubin = package::read_file(out), message = package::read_file(log);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (rc != 0 || cubin.empty()) {
    std::istringstream lines(message);
    std::string first, line;
    for (int i = 0; i < 3 && std::getline(lines, line); ++i) first += (i ? " | " : "") + line;
    throw Error("ptxas (" + ptxas_path() + ") failed for " + arch + ": " + (first.empty() ? "no output" : first));
  }
  return cubin;
}

CudaProgram generate_cuda_program(const lower::LoweredFunc& f, const llvm_backend::MachineSpec& spec) {
  llvm::LLVMContext ctx;
  auto module = std::make_unique<llvm::Module>(f.name, ctx);
  std::unique_ptr<llvm::TargetMachine> tm = llvm_backend::make_target_machine(spec);
  llvm_backend::configure_module(*module, *tm);
  CudaProgram p;
  p.arch = spec.cpu;
  // Lanes of a vectorized loop: GPU schedules have none, so every value is a scalar.
  llvm_backend::CodegenOptions scalar;
  scalar.vector_bits = 32;
  p.kernels = llvm_backend::emit_gpu_kernels(f, scalar, *module);
  link_libdevice(*module);
  p.ptx = llvm_backend::emit_assembly(*module, *tm);
  p.cubin = assemble_ptx(p.ptx, p.arch);
  return p;
}

}  // namespace kiln::cuda
