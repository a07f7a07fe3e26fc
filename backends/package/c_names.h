/// \file C names for a package: the identifiers its header declares for ONNX names and its prefix.
#pragma once
#include <string>
#include <vector>

namespace kiln::package {

/// A valid C identifier for an ONNX value name ("input.1" -> "input_1", "0" -> "_0").
std::string c_identifier(const std::string& name);

/// Unique C field names for a list of ONNX names (a repeat gets "_2", "_3", ...), so two names that
/// map to the same identifier still give two fields.
std::vector<std::string> c_field_names(const std::vector<std::string>& names);

/// The prefix in upper case, for macros (<M>_WORKSPACE_SIZE).
std::string c_macro_prefix(std::string name);

/// Throws Error unless `name` can prefix the package's C symbols (it is its own c_identifier).
void check_package_name(const std::string& name);

}  // namespace kiln::package
