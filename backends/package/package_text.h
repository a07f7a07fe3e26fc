/// \file The text files of a package: the C header <m>.h and the CMake config <m>Config.cmake.
#pragma once
#include <string>

#include "backends/package/model_module.h"

namespace kiln::package {

/// <m>.h: the C ABI of the compiled model (sizes, shapes and dtypes as macros, the context, input and
/// output structs, status codes, <m>_run and <m>_run_argv).
std::string header_text(const ModelModule& m);

/// <m>Config.cmake: lets a CMake project use the package with find_package(<m> CONFIG PATHS DIR) or
/// include(DIR/<m>Config.cmake). Paths are relative to the file, so the directory can be moved.
std::string cmake_config_text(const std::string& m);

}  // namespace kiln::package
