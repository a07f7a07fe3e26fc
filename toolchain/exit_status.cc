#include "toolchain/exit_status.h"

#include <llvm/Support/ErrorHandling.h>
#include <unistd.h>

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

// "Cannot select: <node>\n  <operands>...\nIn function: f" -> "Cannot select: <node> (in function f)".
void on_llvm_fatal_error(void*, const char* reason, bool) {
  const std::string text = reason ? reason : "";
  std::string line = text.substr(0, text.find('\n'));
  if (auto at = text.find("In function: "); at != std::string::npos && at > line.size())
    line += " (in function " + one_line(text.substr(at + 13, text.find('\n', at) - at - 13)) + ")";
  const std::string message = "kiln: internal error: LLVM: " + one_line(line) + "\n";
  // Not through iostreams: LLVM may have failed anywhere, and the process ends right here.
  (void)!::write(2, message.data(), message.size());
  ::_exit(kExitInternalError);
}

}  // namespace

void report_llvm_fatal_errors() { llvm::install_fatal_error_handler(on_llvm_fatal_error, nullptr); }

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
