/// \file How the driver ends on an exception: which message, which exit code. One function, so every
/// command (and its test) agrees that the user's mistakes are exit 2 and kiln's own bugs exit 3.
#pragma once
#include <exception>
#include <ostream>

namespace kiln {

/// Exit codes of the `kiln` driver.
enum ExitCode : int { kExitOk = 0, kExitFailed = 1, kExitUserError = 2, kExitInternalError = 3 };

/// Prints one line for `e` to `err` ("kiln: error: ..." for bad input, "kiln: internal error: ..." for
/// a broken invariant or an unexpected exception) and returns the exit code.
int report_exception(std::exception_ptr e, std::ostream& err);

/// Makes LLVM's fatal errors (an instruction it cannot select for a target, say) end kiln the same way:
/// one line, "kiln: internal error: LLVM: ..." with the function it was compiling, and exit code 3,
/// instead of LLVM's multi-line dump and an abort. LLVM cannot continue after one, so neither does kiln.
void report_llvm_fatal_errors();

}  // namespace kiln
