/// \file Whole-file reads and writes for the package writer and the C compiler calls.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kiln::package {

/// Writes `text` to `p` (replacing it); throws Error naming the file when it cannot.
void write_file(const std::filesystem::path& p, const std::string& text);

/// The bytes of `p`, or "" when it cannot be read.
std::string read_file(const std::filesystem::path& p);

/// A GNU archive of `objects`, members named by file name alone (not the temporary directory's path).
/// Throws Error when an object cannot be read or the archive written.
void write_archive(const std::filesystem::path& archive, const std::vector<std::filesystem::path>& objects);

/// Calls `write` on a fresh temporary directory beside DIR, then moves every file it wrote into DIR
/// (created if needed), so a failure leaves nothing half-written and only the package's own files in
/// DIR are replaced. Throws Error naming what failed; rethrows what `write` throws.
void write_package_dir(const std::string& dir, const std::function<void(const std::filesystem::path& tmp)>& write);

}  // namespace kiln::package
