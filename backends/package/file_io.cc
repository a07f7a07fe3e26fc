#include "backends/package/file_io.h"

#include <fstream>
#include <iterator>

#include "frontend/ir/error.h"

namespace kiln::package {

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  if (!out || !out.write(text.data(), static_cast<std::streamsize>(text.size())))
    throw Error(p.string() + ": cannot write file");
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace kiln::package
