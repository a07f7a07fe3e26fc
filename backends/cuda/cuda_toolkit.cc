#include "backends/cuda/cuda_toolkit.h"

#include <cstdlib>
#include <filesystem>

#include "backends/package/c_compiler.h"

namespace kiln::cuda {

std::string cuda_root() {
  const char* env = std::getenv("KILN_CUDA_ROOT");
  return env && *env ? env : "/usr/local/cuda";
}

std::string ptxas_path() { return cuda_root() + "/bin/ptxas"; }

bool have_ptxas() {
  static const bool ok = std::system((package::shell_quote(ptxas_path()) + " --version >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

std::string cuda_include_flags() { return "-I" + package::shell_quote(cuda_root() + "/include"); }

std::string cuda_link_flags() {
  return "-L" + package::shell_quote(cuda_root() + "/lib64/stubs") + " -L" +
         package::shell_quote(cuda_root() + "/lib64") + " -lcuda";
}

bool have_cuda_device() {
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidia0", ec) || std::system("nvidia-smi -L >/dev/null 2>&1") == 0;
}

}  // namespace kiln::cuda
