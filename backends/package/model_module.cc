#include "backends/package/model_module.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <functional>
#include <string_view>
#include <unordered_map>

#include "backends/llvm/codegen.h"
#include "backends/package/c_names.h"
#include "backends/package/entry_function.h"
#include "frontend/ir/error.h"
#include "frontend/ir/narrow_types.h"

namespace kiln::package {

ModelModule::ModelModule() = default;
ModelModule::ModelModule(ModelModule&&) noexcept = default;
ModelModule& ModelModule::operator=(ModelModule&&) noexcept = default;
ModelModule::~ModelModule() = default;

ModelIo model_io(const Graph& g) {
  ModelIo io;
  auto list = [&](const std::vector<std::string>& names, std::vector<IoInfo>& out) {
    const std::vector<std::string> fields = c_field_names(names);
    for (size_t i = 0; i < names.size(); ++i) {
      const Value& v = g.value(names[i]);
      out.push_back({names[i], fields[i], v.dtype, v.shape, storage_bytes(v.dtype, num_elements(v.shape)), "", -1});
    }
  };
  list(g.inputs, io.inputs);
  list(g.outputs, io.outputs);
  for (IoInfo& o : io.outputs)
    if (auto c = g.count_outputs.find(o.name); c != g.count_outputs.end()) {
      o.count = c->second.count;
      o.count_axis = c->second.axis;
    }
  io.limits = g.limits;
  return io;
}

namespace {

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::set<std::string> runtime_kernels_called(const lower::Stmt& s) {
  std::set<std::string> names;
  std::function<void(const lower::Stmt&)> walk = [&](const lower::Stmt& st) {
    if (!st) return;
    if (st->kind == lower::StmtKind::ExternCall) names.insert(st->callee);
    for (const lower::Stmt& b : st->body) walk(b);
  };
  walk(s);
  return names;
}

// A weight as a const global in the weights section.
llvm::GlobalVariable* weight_global(llvm::Module& mod, const Tensor& t, const std::string& name, const std::string& m) {
  llvm::LLVMContext& ctx = mod.getContext();
  auto* arr = llvm::ArrayType::get(llvm::Type::getInt8Ty(ctx), std::max<size_t>(t.byte_size(), 1));
  llvm::Constant* init = t.byte_size()
                             ? llvm::ConstantDataArray::getRaw(llvm::StringRef(reinterpret_cast<const char*>(t.data()), t.byte_size()),
                                                               t.byte_size(), llvm::Type::getInt8Ty(ctx))
                             : llvm::ConstantAggregateZero::get(arr);
  auto* gv = new llvm::GlobalVariable(mod, arr, true, llvm::GlobalValue::InternalLinkage, init, name);
  gv->setSection(".rodata." + m + ".weights");
  gv->setAlignment(llvm::Align(kWorkspaceAlign));
  return gv;
}

// Weights that fill at least one huge page start on a huge-page boundary: the first weight global takes
// that alignment, so the section does, and linkers (GNU ld, lld) give the segment holding it the same
// p_align, which Linux honours when it places a PIE. Why: a mapping whose address and file offset agree
// modulo the huge page lets Linux map the file's large page-cache folios with huge pages (FilePmdMapped
// in smaps). Streamed through 4 KiB pages, BERT-base's 440 MB of weights ran 2-3x slower at 2 threads
// than at 1, and unevenly from run to run (bench/RESULTS.md). Smaller weights keep 64-byte alignment:
// the padding would cost more file than the pages save.
void start_weights_on_a_huge_page(const std::vector<Slot>& slots, int64_t weights_bytes, int64_t huge_page_bytes) {
  if (huge_page_bytes <= 0 || weights_bytes < huge_page_bytes) return;
  for (const Slot& s : slots)
    if (s.kind == Slot::Weight) {
      s.weight->setAlignment(llvm::Align(static_cast<uint64_t>(huge_page_bytes)));
      return;
    }
}

}  // namespace

ModelModule generate_model_module(const lower::ModelProgram& prog, const ModelMemoryPlan& plan, ModelIo io,
                                  const CodegenOptions& opts) {
  const lower::LoweredFunc& func = prog.func;
  if (plan.offset_of_param.size() != prog.params.size() || prog.params.size() != func.params.size())
    throw InternalError("codegen: kernel parameters and the memory plan disagree");
  ModelModule m;
  m.options = opts;
  m.io = std::move(io);
  m.context = std::make_unique<llvm::LLVMContext>();
  m.module = std::make_unique<llvm::Module>(opts.name, *m.context);
  m.target_machine = llvm_backend::make_target_machine(opts.machine);
  llvm::Module& mod = *m.module;
  llvm_backend::configure_module(mod, *m.target_machine);
  llvm_backend::CodegenOptions codegen = llvm_backend::codegen_options(opts.vector_bits, opts.machine.features);
  for (const lower::InPlaceWrite& w : plan.in_place) codegen.same_bytes.emplace_back(func.params[w.read].get(), func.params[w.written].get());
  llvm_backend::emit_functions({func}, codegen, mod);
  llvm::Function* kernel = mod.getFunction(func.name);
  kernel->setLinkage(llvm::GlobalValue::InternalLinkage);

  const std::string program_text = lower::print_func(func);
  uint64_t hash = fnv1a(1469598103934665603ull, program_text.data(), program_text.size());
  std::vector<Slot> slots;
  int weight_count = 0;
  // Weights with the same bytes share one global: a constant rewritten into the same layout by every
  // task that reads it (an unrolled LSTM's R^T, once per step) is stored once. Keys view the tensors'
  // bytes, which prog keeps alive.
  std::unordered_map<std::string_view, llvm::GlobalVariable*> global_of_bytes;
  for (size_t i = 0; i < prog.params.size(); ++i) {
    const lower::ModelParam& p = prog.params[i];
    switch (p.kind) {
      case lower::ModelParam::Kind::Input: slots.push_back({Slot::Input, p.io_index, nullptr}); break;
      case lower::ModelParam::Kind::Output: slots.push_back({Slot::Output, p.io_index, nullptr}); break;
      case lower::ModelParam::Kind::Weight: {
        const Tensor& t = *p.weight;
        const std::string_view bytes(reinterpret_cast<const char*>(t.data()), t.byte_size());
        llvm::GlobalVariable*& gv = global_of_bytes[bytes];
        if (!gv) {
          gv = weight_global(mod, t, opts.name + "_weight" + std::to_string(weight_count++), opts.name);
          m.weights_bytes += static_cast<int64_t>(t.byte_size());
        }
        slots.push_back({Slot::Weight, 0, gv});
        hash = fnv1a(hash, t.data(), t.byte_size());
        break;
      }
      case lower::ModelParam::Kind::Workspace: slots.push_back({Slot::Workspace, plan.offset_of_param[i], nullptr}); break;
    }
  }
  start_weights_on_a_huge_page(slots, m.weights_bytes, opts.huge_page_bytes);
  m.workspace_size = plan.size;
  m.workspace_lower_bound = plan.lower_bound;
  m.in_place_writes = static_cast<int>(plan.in_place.size());
  m.workspace_in_graph_order = plan.size_in_given_order;
  m.intermediates = plan.intermediates;
  m.model_hash = fmt::format("{:016x}", hash);
  m.runtime_kernels = runtime_kernels_called(func.body);
  for (size_t k = 0; k < prog.subgraphs.size(); ++k)
    for (const te::TensorRef& t : prog.subgraphs[k].dag.tensors) m.kernels.push_back({t->name, t->stage->tag, static_cast<int>(k)});
  emit_entry_functions(mod, opts.name, slots, m.io.inputs.size(), m.io.outputs.size(), plan.size > 0, kWorkspaceAlign, kernel);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(mod, &os)) throw InternalError("codegen: invalid LLVM module: " + os.str());
  return m;
}

std::string print_model_module(const ModelModule& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (const llvm::GlobalVariable& gv : m.module->globals()) {
    const uint64_t bytes = m.module->getDataLayout().getTypeAllocSize(gv.getValueType());
    os << "@" << gv.getName() << ": " << bytes << " bytes" << (gv.isConstant() ? " const" : "")
       << (gv.hasSection() ? ", section " + gv.getSection().str() : std::string()) << "\n";
  }
  for (const llvm::Function& f : m.module->functions()) {
    os << "\n";
    f.print(os);
  }
  return os.str();
}

}  // namespace kiln::package
