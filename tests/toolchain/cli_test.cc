// The driver's surface: usage errors exit 2; the shipped demo model is exactly what `kiln zoo` writes;
// `kiln run` on a package prints its timing line (benchmarks parse it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

int run(const std::string& args) {
  int status = std::system((std::string(KILN_BINARY) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run(""), 2);
  EXPECT_EQ(run("no-such-command"), 2);
  EXPECT_EQ(run("inspect"), 2);
  EXPECT_EQ(run("zoo no_such_model -o /dev/null"), 2);
  EXPECT_EQ(run("--help"), 0);
}

TEST(Cli, ShippedDemoModelIsWhatTheZooWrites) {
  testing::TempDir dir;
  ASSERT_EQ(run("zoo tiny_cnn -o " + dir.path("m.onnx")), 0);
  std::string written = slurp(dir.path("m.onnx"));
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written, slurp(std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx"));
  ASSERT_EQ(run("zoo tiny_cnn --seed 2 -o " + dir.path("m2.onnx")), 0);
  EXPECT_NE(written, slurp(dir.path("m2.onnx")));  // the seed matters
}

// bench/interleave.py reads the fastest run from this line, so its shape is an interface: the fastest
// run can be no slower than the median, and both are real times.
TEST(Cli, RunPrintsTheMedianAndTheFastestRunOfAPackage) {
  testing::TempDir dir;
  const std::string pkg = dir.path("pkg");
  ASSERT_EQ(run("compile " + std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx --target host -o " + pkg), 0);
  testing::CliOutput o = testing::run_kiln_output("run " + pkg + " --repeat 5 --print 0", dir);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::smatch m;
  const std::regex line(R"(median: ([0-9.]+) ms over 5 run\(s\), min ([0-9.]+) ms)");
  ASSERT_TRUE(std::regex_search(o.out, m, line)) << o.out;
  const double median = std::stod(m[1]), fastest = std::stod(m[2]);
  EXPECT_GT(fastest, 0.0) << o.out;
  EXPECT_LE(fastest, median) << o.out;
}

// Input a user hands `kiln run` is never an internal error: a package whose metadata is broken and a
// malformed .npy each get one line naming the file, and exit code 2.
TEST(Cli, BrokenPackageMetadataAndMalformedNpyExitTwo) {
  testing::TempDir dir;
  const std::string pkg = dir.path("pkg");
  ASSERT_EQ(run("compile " + std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx --target host --name m -o " + pkg), 0);
  const std::string good = slurp(pkg + "/m.json");
  ASSERT_NE(good.find("\"name\": \"m\""), std::string::npos) << good;
  auto expect_one_line_error = [&](const std::string& args, const std::string& names) {
    testing::CliOutput o = testing::run_kiln_output(args, dir);
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.err;
    EXPECT_EQ(o.err.find("internal error"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(names), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  };
  for (const std::string& broken : {good.substr(0, good.size() / 2), std::string("{\"name\": 3}"),
                                   std::string("{\"name\": \"m; rm -rf /\", \"target\": {\"name\": \"x\"}, \"inputs\": [], \"outputs\": []}")}) {
    std::ofstream(pkg + "/m.json", std::ios::binary) << broken;
    expect_one_line_error("run " + pkg, "m.json");
  }
  std::ofstream(pkg + "/m.json", std::ios::binary) << good;
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 16, abc), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::ofstream(dir.path("bad.npy"), std::ios::binary)
      << std::string("\x93NUMPY\x01\x00", 8) << static_cast<char>(header.size()) << '\0' << header << std::string(1024, '\0');
  expect_one_line_error("run " + pkg + " --input image=" + dir.path("bad.npy"), "bad.npy");
}

// An --input the model does not have, or one given twice, is a mistake to report, not to ignore while
// the run goes on with seeded or last-given values.
TEST(Cli, UnknownOrRepeatedInputNamesExitTwo) {
  testing::TempDir dir;
  const std::string model = std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx";
  const std::string pkg = dir.path("pkg");
  ASSERT_EQ(run("compile " + model + " --target host --name m -o " + pkg), 0);
  ASSERT_EQ(run("run " + model + " --save-inputs " + dir.path("in")), 0);
  const std::string good = "image=" + dir.path("in") + "/input_0.pb";
  ASSERT_EQ(run("run " + pkg + " --input " + good), 0);
  for (const std::string& target : {pkg, model}) {
    testing::CliOutput o = testing::run_kiln_output("run " + target + " --input Nope=" + dir.path("in") + "/input_0.pb", dir);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("'Nope'"), std::string::npos) << o.err;
    o = testing::run_kiln_output("run " + target + " --input " + good + " --input " + good, dir);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("given twice"), std::string::npos) << o.err;
  }
}

// A sequence input is bound by --sequence: the package takes its tensors as inputs s.0, s.1; without
// the flag the one-line error says which flag, and exits 2.
TEST(Cli, SequenceInputsAreBoundBySequence) {
  testing::TempDir dir;
  ModelBuilder b("sequence_io");
  b.composite_input("s", CompositeType{{ValueKind::Sequence}, DType::Float32, false, {}});
  b.input("t", DType::Float32, Shape{2});
  b.node("SequenceInsert", {"s", "t"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  b.save(dir.path("seq.onnx"));
  ASSERT_EQ(run("compile " + dir.path("seq.onnx") + " --target host --sequence 's=2;3' -o " + dir.path("pkg")), 0);
  const std::string header = slurp(dir.path("pkg") + "/seq.h");
  EXPECT_NE(header.find("INPUT 's.1': float32 [3]"), std::string::npos) << header;
  EXPECT_NE(header.find("OUTPUT 'y.2': float32 [2]"), std::string::npos) << header;
  testing::CliOutput o = testing::run_kiln_output("compile " + dir.path("seq.onnx") + " -o " + dir.path("pkg2"), dir);
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("graph input 's' is a sequence(tensor(float32)): bind the tensors it holds (--sequence s=SHAPE;SHAPE;...)"),
            std::string::npos)
      << o.err;
  o = testing::run_kiln_output("compile " + dir.path("seq.onnx") + " --sequence 's=2;3' --absent s -o " + dir.path("pkg2"), dir);
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("--absent s: the graph has no optional input of that name"), std::string::npos) << o.err;
}

// An output whose extent is decided at run time: `kiln run` of the model and of its package prints
// the counted entries, and the package metadata names the count output.
TEST(Cli, RunPrintsTheCountedEntriesOfARunTimeSizedOutput) {
  testing::TempDir dir;
  ModelBuilder b("nonzero");
  b.input("x", DType::Int32, Shape{2, 3});
  b.node("NonZero", {"x"}, {"where"});
  b.output("where", DType::Int64, Shape{});
  b.save(dir.path("nz.onnx"));
  ASSERT_EQ(run("compile " + dir.path("nz.onnx") + " --target host -o " + dir.path("pkg")), 0);
  EXPECT_NE(slurp(dir.path("pkg") + "/nz.json").find("\"count\": {"), std::string::npos);
  const std::string input = " --input x=0,7,0,-2,0,1";
  for (const std::string& target : {dir.path("nz.onnx"), dir.path("pkg")}) {
    testing::CliOutput o = testing::run_kiln_output("run " + target + input, dir);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("output where int64 [2x3]\n  0 1 1 1 0 2\n"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("output where.count int64 [scalar]\n  3\n"), std::string::npos) << o.out;
  }
}

TEST(Cli, SubstAxiomsChecksEveryAxiom) {
  testing::TempDir dir;
  testing::CliOutput o = testing::run_kiln_output("subst axioms --max-cases 3", dir);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| matmul is associative | `matmul(x, matmul(y, z)) = matmul(matmul(x, y), z)` | 3 | holds |"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find(" 0 failing"), std::string::npos) << o.out;
}

TEST(Cli, SubstGenerateCountsEachStageAndWritesTheCandidates) {
  testing::TempDir dir;
  testing::CliOutput o = testing::run_kiln_output("subst generate --max-ops 2 -o " + dir.path("rules.txt"), dir);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| ... after common subgraphs |"), std::string::npos) << o.out;
  EXPECT_NE(slurp(dir.path("rules.txt")).find("ewadd(x, y) = ewadd(y, x)\n"), std::string::npos);
  o = testing::run_kiln_output("subst generate --max-ops 1 --verify -o " + dir.path("proved.txt"), dir);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| ... proved from the axioms (Z3, rlimit 200000 each) |"), std::string::npos) << o.out;
  const std::string proved = slurp(dir.path("proved.txt"));
  EXPECT_EQ(proved.rfind("# kiln graph substitutions: `kiln subst generate --max-ops 1 --seed 1 --verify --rlimit 200000`\n# axioms: ", 0), 0u)
      << proved;
  EXPECT_NE(proved.find("ewadd(x, y) = ewadd(y, x)\n"), std::string::npos) << proved;
  o = testing::run_kiln_output("subst generate --max-ops 9", dir);
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("--max-ops must be 1 to 3, got 9"), std::string::npos) << o.err;
}

// ONNX's Binarizer test imports only ai.onnx.ml: inspect summarises it (opset 0: no default domain)
// instead of looking up a default-domain opset that is not there.
TEST(Cli, InspectOfAModelImportingOnlyTheMlDomain) {
  const std::string model = std::string(KILN_SOURCE_DIR) + "/../shared/onnx-node/test_ai_onnx_ml_binarizer/model.onnx";
  if (!std::ifstream(model)) GTEST_SKIP() << model << " is missing (the shared ONNX node tests)";
  testing::TempDir dir;
  testing::CliOutput o = testing::run_kiln_output("inspect " + model, dir);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("opset 0"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace kiln
