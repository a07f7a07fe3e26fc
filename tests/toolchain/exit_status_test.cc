// The driver's contract: bad input is exit 2 with "kiln: error:", a broken invariant is exit 3 with
// "kiln: internal error:" even when its message looks like a user's mistake, and every report is one line.
#include "toolchain/exit_status.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include "frontend/ir/error.h"
#include "targets/target.h"

namespace kiln {
namespace {

template <typename E>
std::pair<int, std::string> report(const E& e) {
  std::ostringstream err;
  const int code = report_exception(std::make_exception_ptr(e), err);
  return {code, err.str()};
}

TEST(ExitStatus, UserErrorsExitTwo) {
  EXPECT_EQ(report(Error("model.onnx: node 'x': bad axis")), std::make_pair(2, std::string("kiln: error: model.onnx: node 'x': bad axis\n")));
  EXPECT_EQ(report(Unsupported("op Foo")).first, 2);
  EXPECT_EQ(report(TargetError("t.toml: missing field 'triple'")).first, 2);
  EXPECT_EQ(report(std::bad_alloc()).first, 2);
}

TEST(ExitStatus, InvariantFailuresAreInternalErrorsNotUserErrors) {
  const auto [code, text] = report(InternalError("lower_model: value 'x' is an output of two subgraphs"));
  EXPECT_EQ(code, 3);
  EXPECT_EQ(text.rfind("kiln: internal error: ", 0), 0u) << text;
  EXPECT_EQ(report(std::out_of_range("map::at")).first, 3);
  std::ostringstream err;
  EXPECT_EQ(report_exception(std::make_exception_ptr(42), err), 3);
}

TEST(ExitStatus, AMultiLineMessageIsReportedOnOneLine) {
  const auto [code, text] = report(Error("codegen: invalid IR:\n  %1 = add\n"));
  EXPECT_EQ(code, 2);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

}  // namespace
}  // namespace kiln
