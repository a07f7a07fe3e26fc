// `kiln compile --schedule random --dump-after ...` and its errors, and `kiln check-schedules --records`,
// through the real binary.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ModelBuilder matmul_relu_model() {
  ModelBuilder b("mm", 17);
  b.input("a", DType::Float32, Shape{16, 24});
  b.input("w", DType::Float32, Shape{24, 8});
  b.node("MatMul", {"a", "w"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  b.output("y", DType::Float32, Shape{16, 8});
  return b;
}

// Runs kiln with stdout kept in `out`.
int run_with_stdout(const std::string& args, const testing::TempDir& dir, std::string& out) {
  const std::string file = dir.path("stdout.txt");
  const std::string cmd = std::string("timeout 120 ") + KILN_BINARY + " " + args + " >" + file + " 2>&1";
  int status = std::system(cmd.c_str());
  out = slurp(file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ScheduleCli, DumpAfterSketchPrintsEachTasksSketches) {
  testing::TempDir dir;
  matmul_relu_model().save(dir.path("m.onnx"));
  std::string out;
  ASSERT_EQ(run_with_stdout("compile " + dir.path("m.onnx") + " -o " + dir.path("pkg") + " --dump-after sketch", dir, out), 0) << out;
  EXPECT_NE(out.find("; after sketch of task"), std::string::npos) << out;
  EXPECT_NE(out.find("sketch 0:"), std::string::npos) << out;
  EXPECT_NE(out.find("sketch 1:"), std::string::npos) << out;
  EXPECT_NE(out.find(".compute_at("), std::string::npos) << out;
}

TEST(ScheduleCli, RandomScheduleIsSeededAndDumpsThePrograms) {
  testing::TempDir dir;
  matmul_relu_model().save(dir.path("m.onnx"));
  std::string a, b, c;
  const std::string base = "compile " + dir.path("m.onnx") + " --schedule random --dump-after schedule -o ";
  ASSERT_EQ(run_with_stdout(base + dir.path("p1") + " --seed 4", dir, a), 0) << a;
  ASSERT_EQ(run_with_stdout(base + dir.path("p2") + " --seed 4", dir, b), 0) << b;
  ASSERT_EQ(run_with_stdout(base + dir.path("p3") + " --seed 5", dir, c), 0) << c;
  auto programs = [](const std::string& s) { return s.substr(0, s.find("wrote ")); };
  EXPECT_EQ(programs(a), programs(b));
  EXPECT_NE(programs(a), programs(c));
  EXPECT_NE(a.find("; after schedule of task"), std::string::npos) << a;
}

// Every record of the file is checked against the evaluator, failed ones included: the tuned programs
// pass, and a record whose steps do not replay on its task is a failure line naming the record.
TEST(ScheduleCli, CheckSchedulesReplaysEveryRecordOfAFile) {
  testing::TempDir dir;
  matmul_relu_model().save(dir.path("m.onnx"));
  const std::string records = dir.path("r.json");
  std::string out;
  ASSERT_EQ(run_with_stdout("tune " + dir.path("m.onnx") + " --target host --records " + records +
                                " --trials 6 --measures-per-round 3 --threads 1 --repeat 1 --plain --finalists 0",
                            dir, out),
            0)
      << out;
  std::string last;
  int lines = 0;
  {
    std::istringstream in(slurp(records));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) last = line, ++lines;
  }
  ASSERT_EQ(lines, 6);
  nlohmann::json broken = nlohmann::json::parse(last);
  broken["i"][1][1] = nlohmann::json::parse(R"([["SP", 99, 0, 16, [4], 1]])");
  std::ofstream(records, std::ios::app) << broken.dump() << "\n";

  EXPECT_EQ(run_with_stdout("check-schedules " + dir.path("m.onnx") + " --records " + records, dir, out), 1) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"((\d+) tasks, (\d+)/(\d+) programs correct)"))) << out;
  EXPECT_EQ(m[2], "6") << out;
  EXPECT_EQ(m[3], "7") << out;
  EXPECT_NE(out.find("FAIL record 7 ("), std::string::npos) << out;
  EXPECT_NE(out.find("does not replay"), std::string::npos) << out;
}

// A CUDA target's records name gpu_tile steps: compile --records lowers the task with the recorded
// tile when it beats the default, and with the default rule (one note) when the tile does not fit the GPU.
TEST(ScheduleCli, GpuRecordsChooseTheTileOfEachTask) {
  testing::TempDir dir;
  const std::string model = dir.path("mm.onnx"), records = dir.path("r.json");
  std::string out;
  ASSERT_EQ(run_with_stdout("zoo matmul --m 256 --n 256 --k 256 -o " + model, dir, out), 0) << out;
  ASSERT_EQ(run_with_stdout("compile " + model + " --target cuda-sm90 -o " + dir.path("p") + " --dump-after tasks", dir, out), 0);
  std::smatch key;
  ASSERT_TRUE(std::regex_search(out, key, std::regex(R"(\n\s+0\s+([0-9a-f]{16})\s)"))) << out;
  const std::string head = R"({"i":[[")" + key[1].str() + R"(","cuda-sm90",[132,16,64,49152,0,1024,0,32]],[[],)";
  auto write = [&](const std::string& tile) {
    std::ofstream f(records);
    f << head << R"([]]],"kiln_default":true,"r":[[0.002],0,0.1,1795815147.0],"v":"v0.6"})" << "\n"
      << head << "[" << tile << R"(]]],"r":[[0.001],0,0.1,1795815147.0],"v":"v0.6"})" << "\n";
  };
  const std::string lower = "compile " + model + " --target cuda-sm90 -o " + dir.path("p") + " --dump-after lower";
  // 2 x 64 outputs per block, 1 x 4 per thread: 512 blocks of 32 threads.
  write(R"(["GT",2,[2,64],[1,4],2])");
  ASSERT_EQ(run_with_stdout(lower + " --records " + records, dir, out), 0) << out;
  EXPECT_NE(out.find("blockIdx.x for matmul.b in 0..512:"), std::string::npos) << out;
  EXPECT_NE(out.find("threadIdx.x for matmul.init in 0..32:"), std::string::npos) << out;
  // 65536 threads per block: not a tile this GPU's schedule takes.
  write(R"(["GT",2,[256,256],[1,1],8])");
  ASSERT_EQ(run_with_stdout(lower + " --records " + records, dir, out), 0) << out;
  EXPECT_NE(out.find("does not replay"), std::string::npos) << out;
  EXPECT_EQ(out.find("threadIdx.x for matmul.init in 0..65536"), std::string::npos) << out;
  std::string untuned;
  ASSERT_EQ(run_with_stdout(lower, dir, untuned), 0);
  EXPECT_EQ(untuned.find("threadIdx.x for matmul.init in 0..32:"), std::string::npos) << "the default took the recorded tile";
}

TEST(ScheduleCliErrors, UnknownScheduleKind) {
  testing::TempDir dir;
  matmul_relu_model().save(dir.path("m.onnx"));
  auto r = testing::run_kiln("compile " + dir.path("m.onnx") + " -o " + dir.path("pkg") + " --schedule fast", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--schedule 'fast'"), std::string::npos) << r.stderr_text;
}

TEST(ScheduleCliErrors, UnknownDumpStep) {
  testing::TempDir dir;
  matmul_relu_model().save(dir.path("m.onnx"));
  auto r = testing::run_kiln("compile " + dir.path("m.onnx") + " -o " + dir.path("pkg") + " --dump-after tiles", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--dump-after 'tiles'"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace kiln
