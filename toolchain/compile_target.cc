#include "toolchain/compile_target.h"

#include <algorithm>

#include "targets/target.h"

namespace kiln {

CompileTarget resolve_target(const std::string& name) {
  Target t = load_target(name);
  CompileTarget c;
  c.name = t.name;
  c.file = t.file;
  c.machine = llvm_backend::machine_of(t);
  c.vector_bits = t.vector_bits;
  c.cc = t.cc;
  c.run_prefix = t.run_prefix;
  c.cores = std::max(t.cores, 1);
  c.huge_page_bytes = t.huge_page_bytes;
  c.gpu = t.gpu;
  c.bare_metal = t.bare_metal;
  return c;
}

}  // namespace kiln
