/// \file Whole-file reads and writes for the package writer and the C compiler calls.
#pragma once
#include <filesystem>
#include <string>

namespace kiln::package {

/// Writes `text` to `p` (replacing it); throws Error naming the file when it cannot.
void write_file(const std::filesystem::path& p, const std::string& text);

/// The bytes of `p`, or "" when it cannot be read.
std::string read_file(const std::filesystem::path& p);

}  // namespace kiln::package
