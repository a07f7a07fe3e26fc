#include "backends/package/file_io.h"

#include <fmt/format.h>
#include <llvm/Object/ArchiveWriter.h>
#include <llvm/Support/Error.h>

#include <fstream>
#include <iterator>
#include <random>

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

namespace fs = std::filesystem;

void write_archive(const fs::path& archive, const std::vector<fs::path>& objects) {
  std::vector<llvm::NewArchiveMember> members;
  std::vector<std::string> member_names;  // plain file names, not the temporary directory's path
  member_names.reserve(objects.size());
  for (const fs::path& f : objects) {
    auto member = llvm::NewArchiveMember::getFile(f.string(), true);
    if (!member) {
      llvm::consumeError(member.takeError());
      throw Error("package: cannot read " + f.string());
    }
    member->MemberName = member_names.emplace_back(f.filename().string());
    members.push_back(std::move(*member));
  }
  if (llvm::Error e = llvm::writeArchive(archive.string(), members, llvm::SymtabWritingMode::NormalSymtab,
                                         llvm::object::Archive::K_GNU, true, false))
    throw Error("package: cannot write the archive: " + llvm::toString(std::move(e)));
}

void write_package_dir(const std::string& dir, const std::function<void(const fs::path& tmp)>& write) {
  fs::path target = fs::absolute(dir);
  fs::path parent = target.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw Error(dir + ": cannot create the output directory: " + ec.message());
  fs::path tmp = parent / fmt::format(".{}.kiln-tmp-{}", target.filename().string(), std::random_device{}());
  fs::create_directory(tmp, ec);
  if (ec) throw Error(dir + ": cannot write into " + parent.string() + ": " + ec.message());
  try {
    write(tmp);
    fs::create_directories(target, ec);
    if (ec) throw Error(dir + ": cannot create the output directory: " + ec.message());
    for (const auto& e : fs::directory_iterator(tmp)) {
      fs::rename(e.path(), target / e.path().filename(), ec);
      if (ec) throw Error(dir + ": cannot move " + e.path().filename().string() + " into place: " + ec.message());
    }
    fs::remove(tmp, ec);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace kiln::package
