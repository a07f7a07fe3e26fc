#include "backends/package/c_compiler.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/package/file_io.h"
#include "backends/package/runtime_sources.h"
#include "frontend/ir/error.h"

namespace kiln::package {
namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::optional<std::string> compiled_object(const std::string& cc, const fs::path& src, const std::string& flags,
                                           std::string& log) {
  static std::mutex mu;
  struct Result {
    std::optional<std::string> bytes;
    std::string log;
  };
  static std::map<std::string, Result> cache;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = cc + '\n' + src.filename().string() + '\n' + flags;
  auto it = cache.find(key);
  if (it == cache.end()) {
    fs::path obj = fs::path(src).replace_extension(".o"), log_file = fs::path(src).replace_extension(".log");
    std::string cmd = fmt::format("{} -O2 -std=c11 -fPIC {} -c {} -o {} >{} 2>&1", cc, flags, shell_quote(src.string()),
                                  shell_quote(obj.string()), shell_quote(log_file.string()));
    Result r;
    if (std::system(cmd.c_str()) == 0 && fs::exists(obj)) r.bytes = read_file(obj);
    else r.log = fs::exists(log_file) ? read_file(log_file) : "";
    std::error_code ec;
    fs::remove(obj, ec);
    fs::remove(log_file, ec);
    it = cache.emplace(key, std::move(r)).first;
  }
  log = it->second.log;
  return it->second.bytes;
}

bool compile_pool_object(const std::string& cc, const fs::path& dir) {
  if (cc.empty()) return false;
  std::string log;
  auto bytes = compiled_object(cc, dir / "kiln_parallel_pthread.c", "-pthread", log);
  if (bytes) write_file(dir / "kiln_parallel_pthread.o", *bytes);
  return bytes.has_value();
}

std::vector<fs::path> compile_runtime_kernels(const std::set<std::string>& names, const std::string& cc,
                                              const fs::path& work) {
  std::vector<fs::path> objects;
  if (names.empty()) return objects;
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  if (cc.empty()) throw Error("package: the model calls runtime kernels (" + list + ") and the target names no C compiler (cc)");
  fs::create_directories(work);
  write_file(work / "kiln_rt_kernels.h", kRuntimeKernelsH);
  for (const std::string& name : names) {
    const RuntimeKernelSource* src = nullptr;
    for (const RuntimeKernelSource& k : kRuntimeKernelSources)
      if (name == k.name) src = &k;
    if (!src) throw Error("package: no source for runtime kernel " + name);
    fs::path c_file = work / (name + ".c");
    write_file(c_file, src->text);
    std::string log;
    auto bytes = compiled_object(cc, c_file, "-ffreestanding", log);
    if (!bytes) throw Error("package: " + cc + " cannot compile runtime kernel " + name + ": " + log.substr(0, 400));
    objects.push_back(work / (name + ".o"));
    write_file(objects.back(), *bytes);
  }
  return objects;
}

}  // namespace kiln::package
