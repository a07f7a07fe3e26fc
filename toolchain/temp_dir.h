/// \file A private temporary directory that removes itself: packages compiled only to be run or
/// dumped, and the runners linked against them.
#pragma once
#include <string>

namespace kiln {

class TempDir {
 public:
  /// Creates $TMPDIR/<prefix>-XXXXXX (mode 0700). Throws Error when it cannot.
  explicit TempDir(const std::string& prefix);
  /// Removes the directory and everything in it, unless KILN_KEEP_TEMP is set (for debugging).
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kiln
