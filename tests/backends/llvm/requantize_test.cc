// The int8 requantization in integer instructions on 32-bit Arm (backends/llvm/requantize.h): which
// casts take it, and that compiled packages print the reference's integers on every edge case (ties
// both ways, saturation at both bounds of int8 and uint8, infinities, NaN). What the M4's code is:
// CodegenSchedule.RequantizationIsVcvtrAndSaturatingIntegersOnA32BitArmCore.
#include "backends/llvm/requantize.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/frontend/test_models.h"

namespace kiln::llvm_backend {
namespace {

using te::Expr;
using te::ExprOp;

const Expr kY = te::var("y", DType::Float32);

Expr clamp(const Expr& v, double lo, double hi) {
  return te::min(te::max(v, te::float_imm(lo)), te::float_imm(hi));
}
Expr zero_point(DType t) { return te::cast(DType::Float32, te::var("z", t)); }

TEST(RequantizeVcvtr, MatchesTheLoweringsFormAndNothingLooser) {
  const Expr rounded = te::unary(ExprOp::Round, kY);
  // As nn_conv_lowering.cc writes it: round, plus the zero point, clamped, cast.
  std::optional<RequantizeForm> f = match_requantize(*te::cast(DType::Int8, clamp(rounded + zero_point(DType::Int8), -128, 127)));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->scaled.get(), kY.get());
  ASSERT_TRUE(f->zero_point);
  EXPECT_EQ(f->zero_point->dtype, DType::Int8);
  EXPECT_EQ(f->lo, -128);
  EXPECT_EQ(f->hi, 127);
  // No zero point (QLinearMatMul without one), uint8, the clamp the other way round, a narrower range.
  f = match_requantize(*te::cast(DType::UInt8, te::max(te::min(rounded, te::float_imm(200)), te::float_imm(3))));
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->zero_point);
  EXPECT_EQ(f->lo, 3);
  EXPECT_EQ(f->hi, 200);
  // Not taken: bounds outside the type or not integers, no rounding, a 32-bit zero point (not exact
  // in float32), a 32-bit result, only one bound.
  EXPECT_FALSE(match_requantize(*te::cast(DType::Int8, clamp(rounded, -129, 127))));
  EXPECT_FALSE(match_requantize(*te::cast(DType::Int8, clamp(rounded, -128, 126.5))));
  EXPECT_FALSE(match_requantize(*te::cast(DType::Int8, clamp(kY, -128, 127))));
  EXPECT_FALSE(match_requantize(*te::cast(DType::Int8, clamp(rounded + zero_point(DType::Int32), -128, 127))));
  EXPECT_FALSE(match_requantize(*te::cast(DType::Int32, clamp(rounded, -128, 127))));
  EXPECT_FALSE(match_requantize(*te::cast(DType::Int8, te::min(rounded, te::float_imm(127)))));
}

// The values printed for each output of `kiln run`, without the timing lines.
std::string printed_values(const std::string& out) {
  std::string kept;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("output ", 0) == 0 || line.rfind("  ", 0) == 0) kept += line + "\n";
  return kept;
}

// kiln zoo requantize_edges (frontend/zoo/single_op.cc) on inputs that reach every edge: odd values
// are ties at multipliers 0.5 and 1.5, 0 is NaN at the infinite one, the rest saturate somewhere;
// and its QuantizeLinear on NaN, infinities, ties and a value past 2^24 once scaled.
// The M4 and M7 take the VCVTR path (CodegenSchedule.RequantizationIsVcvtrAndSaturatingIntegersOnA32BitArmCore),
// the x86 targets the float one.
TEST(RequantizeVcvtr, CompiledPackagesPrintTheReferencesIntegersOnEveryEdge) {
  testing::TempDir dir;
  const std::string model = dir.path("rq.onnx");
  ASSERT_EQ(testing::run_kiln_output("zoo requantize_edges -o " + model, dir).exit_code, 0);
  const std::string input =
      " --input A=-128,-127,-100,-86,-85,-84,-83,-9,-7,-5,-3,-2,-1,0,1,2,3,5,7,9,83,84,85,127"
      " --input F=nan,inf,-inf,1.25,-1.25,63.75,-61.25,8388608.5 --print 1000";
  const testing::CliOutput ref = testing::run_kiln_output("run " + model + input, dir);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string expected = printed_values(ref.out);
  ASSERT_NE(expected.find(" 0 5 7 127 127"), std::string::npos) << "NaN gives 0, not the zero point 5\n" << expected;
  // QuantizeLinear (scheduler/te/ops/linalg_quant_lowering.cc, in float32 for 8-bit results): NaN
  // gives the zero point, ties go to even.
  ASSERT_NE(expected.find("-3 127 -128 -1 -5 125 -125 127"), std::string::npos) << expected;
  std::vector<std::string> targets{"x86_64-generic", "host"};
  if (testing::have_tool("qemu-system-arm")) targets.insert(targets.end(), {"cortex-m4", "cortex-m7"});
  for (const std::string& target : targets) {
    const std::string pkg = dir.path("pkg-" + target);
    testing::CliOutput o = testing::run_kiln_output("compile " + model + " --target " + target + " -o " + pkg, dir);
    ASSERT_EQ(o.exit_code, 0) << target << ": " << o.err;
    o = testing::run_kiln_output("run " + pkg + input, dir);
    ASSERT_EQ(o.exit_code, 0) << target << ": " << o.err;
    EXPECT_EQ(printed_values(o.out), expected) << target;
  }
  if (!testing::have_tool("qemu-system-arm")) GTEST_SKIP() << "ran on x86 only: no qemu-system-arm (scripts/install-deps.sh installs it)";
}

}  // namespace
}  // namespace kiln::llvm_backend
