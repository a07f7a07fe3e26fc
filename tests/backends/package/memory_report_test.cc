// The memory report (backends/package/memory_report.h): kiln compile prints flash and SRAM, the JSON has
// them, --max-sram refuses a model that needs more with one line naming the numbers and writes nothing,
// and on a Cortex-M4 under QEMU the measured stack agrees with the estimate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

const std::string kModel = std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx";

nlohmann::json memory_of(const std::string& pkg) {
  return nlohmann::json::parse(testing::read_file(pkg + "/tiny_cnn.json")).at("memory");
}

TEST(MemoryReport, CompilePrintsFlashAndSramAndTheJsonHasThem) {
  testing::TempDir dir;
  for (const std::string target : {"host", "cortex-m4"}) {
    const std::string pkg = dir.path(target);
    testing::CliOutput o = testing::run_kiln_output("compile " + kModel + " --name tiny_cnn --target " + target + " -o " + pkg, dir);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(memory: flash [0-9.]+ KiB \(code [0-9.]+ KiB, weights [0-9.]+ KiB\); SRAM )")))
        << o.out;
    const nlohmann::json m = memory_of(pkg);
    EXPECT_GT(m.at("code_bytes").get<int64_t>(), 0) << target;
    EXPECT_EQ(m.at("flash_bytes").get<int64_t>(), m.at("code_bytes").get<int64_t>() + m.at("weights_bytes").get<int64_t>());
    EXPECT_GT(m.at("stack_bytes").get<int64_t>(), 0) << target;
    EXPECT_FALSE(m.at("stack_dynamic").get<bool>()) << target;  // every frame has a compile-time size
    EXPECT_EQ(m.at("sram_bytes").get<int64_t>(), m.at("arena_bytes").get<int64_t>() + m.at("stack_bytes").get<int64_t>() +
                                                     m.at("library_data_bytes").get<int64_t>());
    EXPECT_GE(m.at("arena_bytes").get<int64_t>(), m.at("arena_lower_bound").get<int64_t>());
  }
}

TEST(MemoryReport, MaxSramRefusesAModelThatNeedsMore) {
  testing::TempDir dir;
  const std::string fits = dir.path("fits");
  ASSERT_EQ(testing::run_kiln_output("compile " + kModel + " --name tiny_cnn --target cortex-m4 -o " + fits, dir).exit_code, 0);
  const int64_t need = memory_of(fits).at("sram_bytes").get<int64_t>();
  // Exactly enough passes; one byte less fails, names both numbers on one line and leaves no package.
  EXPECT_EQ(testing::run_kiln_output("compile " + kModel + " --target cortex-m4 --max-sram " + std::to_string(need) + " -o " +
                                         dir.path("exact"), dir)
                .exit_code,
            0);
  testing::CliOutput o = testing::run_kiln_output(
      "compile " + kModel + " --target cortex-m4 --max-sram " + std::to_string(need - 1) + " -o " + dir.path("small"), dir);
  EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
  EXPECT_NE(o.err.find("needs " + std::to_string(need) + " bytes of SRAM"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("--max-sram " + std::to_string(need - 1)), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("small")));
  // Sizes with units, and nonsense refused as a usage error.
  EXPECT_EQ(testing::run_kiln_output("compile " + kModel + " --target cortex-m4 --max-sram 1M -o " + dir.path("m"), dir).exit_code, 0);
  EXPECT_EQ(testing::run_kiln_output("compile " + kModel + " --target cortex-m4 --max-sram lots -o " + dir.path("x"), dir).exit_code, 2);
}

// A bare-metal target's memory map is a limit: tiny_cnn (5.5 KiB of weights, a 10 KiB arena) on a board
// with 4 KiB of flash, or with 8 KiB of SRAM, is refused by name, and nothing is written.
TEST(MemoryReport, ABoardTooSmallIsRefused) {
  testing::TempDir dir;
  const std::string shipped = testing::read_file(std::string(KILN_SOURCE_DIR) + "/targets/cortex-m4.toml");
  ASSERT_FALSE(shipped.empty());
  auto board = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = shipped;
    text.replace(text.find(from), from.size(), to);
    std::ofstream(dir.path(name + ".toml")) << text;
    return dir.path(name + ".toml");
  };
  const std::string small_flash = board("small-flash", "flash_bytes = 0x00400000", "flash_bytes = 0x1000");
  const std::string small_sram =
      board("small-sram", "sram_bytes = 0x00400000\nstack_bytes = 0x4000", "sram_bytes = 0x2000\nstack_bytes = 0x400");
  testing::CliOutput o = testing::run_kiln_output("compile " + kModel + " --target " + small_flash + " -o " + dir.path("a"), dir);
  EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
  EXPECT_NE(o.err.find("bytes of flash"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("more than the 4096 bytes of the target small-flash"), std::string::npos) << o.err;
  o = testing::run_kiln_output("compile " + kModel + " --target " + small_sram + " -o " + dir.path("b"), dir);
  EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
  EXPECT_NE(o.err.find("more than the 8192 bytes of the target small-sram"), std::string::npos) << o.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("a")));
  EXPECT_FALSE(std::filesystem::exists(dir.path("b")));
}

// The stack estimate is the model's deepest call chain; the runner measures the high-water mark on the
// board, which also holds what the estimate names as left out (memset's frame) and the SysTick
// interrupt's exception frame (32 bytes, 104 with the FPU's registers). So the measurement is at
// least the estimate (less the painter's margin) and at most the estimate plus those.
TEST(MemoryReport, MeasuredStackOnACortexM4AgreesWithTheEstimate) {
  if (!testing::have_tool("qemu-system-arm") || !testing::have_tool("arm-none-eabi-gcc"))
    GTEST_SKIP() << "no qemu-system-arm or arm-none-eabi-gcc (scripts/install-deps.sh installs them)";
  testing::TempDir dir;
  const std::string pkg = dir.path("pkg");
  ASSERT_EQ(testing::run_kiln_output("compile " + kModel + " --name tiny_cnn --target cortex-m4 -o " + pkg, dir).exit_code, 0);
  const int64_t estimate = memory_of(pkg).at("stack_bytes").get<int64_t>();
  testing::CliOutput o = testing::run_kiln_output("run " + pkg + " --repeat 3 --print 0", dir);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex(R"(instructions: ([0-9]+) per run \(QEMU -icount, median of 3; fewest ([0-9]+)\); stack ([0-9]+) bytes)")))
      << o.out;
  const double instructions = std::stod(m[1]), fewest = std::stod(m[2]);
  const int64_t measured = std::stoll(m[3]);
  // tiny_cnn: two small convs and a dense layer, about 60 thousand multiply-adds.
  EXPECT_GT(instructions, 60e3) << o.out;
  EXPECT_LT(instructions, 5e6) << o.out;
  EXPECT_LE(fewest, instructions);
  EXPECT_GE(measured, estimate - 32) << o.out;
  EXPECT_LE(measured, estimate + 160) << o.out;
}

}  // namespace
}  // namespace kiln
