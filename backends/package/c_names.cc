#include "backends/package/c_names.h"

#include <cctype>
#include <set>

#include "frontend/ir/error.h"

namespace kiln::package {

std::string c_identifier(const std::string& name) {
  std::string out;
  for (char ch : name) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

std::vector<std::string> c_field_names(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::set<std::string> used;
  for (const auto& n : names) {
    std::string c = c_identifier(n), candidate = c;
    for (int k = 2; !used.insert(candidate).second; ++k) candidate = c + "_" + std::to_string(k);
    out.push_back(candidate);
  }
  return out;
}

std::string c_macro_prefix(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

void check_package_name(const std::string& name) {
  if (name.empty() || c_identifier(name) != name)
    throw Error("--name '" + name + "' is not a C identifier (letters, digits, '_'; not starting with a digit)");
}

}  // namespace kiln::package
