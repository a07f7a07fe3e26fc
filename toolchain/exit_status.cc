#include "toolchain/exit_status.h"

#include <new>
#include <string>

#include "frontend/ir/error.h"
#include "targets/target.h"

namespace kiln {

namespace {

// Messages may carry a newline from a library (nlohmann, LLVM); the report stays one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

int report_exception(std::exception_ptr e, std::ostream& err) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    err << "kiln: error: " << one_line(x.what()) << "\n";
    return kExitUserError;
  } catch (const TargetError& x) {
    err << "kiln: error: " << one_line(x.what()) << "\n";
    return kExitUserError;
  } catch (const std::bad_alloc&) {
    err << "kiln: error: out of memory (is the model's shape sane?)\n";
    return kExitUserError;
  } catch (const std::exception& x) {  // InternalError and anything a library threw that kiln did not expect
    err << "kiln: internal error: " << one_line(x.what()) << "\n";
    return kExitInternalError;
  } catch (...) {
    err << "kiln: internal error: unknown exception\n";
    return kExitInternalError;
  }
}

}  // namespace kiln
