#include "toolchain/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "frontend/ir/error.h"

namespace kiln {

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw Error(pattern + ": cannot create a temporary directory: " + std::strerror(errno));
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!std::getenv("KILN_KEEP_TEMP")) std::filesystem::remove_all(path_, ec);
}

}  // namespace kiln
