/// \file The target's C compiler as the package calls it: the runtime kernels a model calls
/// (runtime/kernels/) go into lib<m>.a, and the optional pthread pool ships prebuilt beside it.
///
/// Both are C sources embedded in the kiln binary (runtime_sources.h), compiled per target because a
/// package is for one target and the user's machine may have no compiler for it.
#pragma once
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::package {

/// A single-quoted shell word, for paths in the compiler command line.
std::string shell_quote(const std::string& s);

/// The object code of one C file compiled by `cc` (-O2 -std=c11 -fPIC plus `flags`), cached for the
/// process per compiler, file name and flags: a process that writes many packages (conformance
/// --engine compiled) compiles each runtime file once. nullopt (also cached) when the compiler fails;
/// `log` then holds its output.
std::optional<std::string> compiled_object(const std::string& cc, const std::filesystem::path& src,
                                           const std::string& flags, std::string& log);

/// Compiles dir/kiln_parallel_pthread.c into dir/kiln_parallel_pthread.o. Failure is not an error
/// (false): the compiler may be missing or the target may have no pthreads; the .c stays in the
/// package for whoever needs it.
bool compile_pool_object(const std::string& cc, const std::filesystem::path& dir);

/// Compiles each runtime kernel in `names` into work/<name>.o and returns the objects. Unlike the pool,
/// a kernel is required (the library would have undefined symbols): throws Error when `cc` is empty or
/// fails, or a name has no source.
std::vector<std::filesystem::path> compile_runtime_kernels(const std::set<std::string>& names, const std::string& cc,
                                                           const std::filesystem::path& work);

}  // namespace kiln::package
