// Stage names are the interface of --dump-after: one list, in pipeline order, each documented in
// docs/pipeline.md; an unknown name is an error, and only wanted stages build their text.
#include "toolchain/stage_dump.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/ir/error.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

TEST(StageDump, UnknownStageIsAnErrorNamingIt) {
  try {
    StageDump({"tiles"});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiles"), std::string::npos) << e.what();
  }
}

TEST(StageDump, OnlyWantedStagesBuildTheirTextAndLastWantedFollowsPipelineOrder) {
  std::string out;
  StageDump d({"lower", "infer"}, [&](const std::string& text) { out += text; });
  EXPECT_EQ(d.last_wanted(), "lower");
  int built = 0;
  d.dump("prune", [&] { ++built; return std::string("x\n"); });
  d.dump("infer", [&] { ++built; return std::string("graph\n"); });
  d.dump("lower", [&] { ++built; return std::string("func\n"); }, "task k");
  EXPECT_EQ(built, 2);
  EXPECT_EQ(out, "; after infer\ngraph\n; after lower of task k\nfunc\n");
  EXPECT_EQ(StageDump({"all"}).last_wanted(), pipeline_stages().back());
  EXPECT_EQ(StageDump().last_wanted(), "");
}

// docs/pipeline.md walks through pipeline.cc; a stage added without its section fails here.
TEST(StageDump, EveryStageHasItsSectionInTheDocsInOrder) {
  const std::string doc = testing::read_file(std::string(KILN_SOURCE_DIR) + "/docs/pipeline.md");
  ASSERT_FALSE(doc.empty());
  std::string headings;  // the "## " lines, in order
  for (size_t at = doc.find("\n## "); at != std::string::npos; at = doc.find("\n## ", at + 1))
    headings += doc.substr(at + 1, doc.find('\n', at + 1) - at - 1) + "\n";
  size_t pos = 0;
  for (const std::string& stage : pipeline_stages()) {
    const size_t at = headings.find(" " + stage, pos);
    ASSERT_NE(at, std::string::npos) << "'" << stage << "' has no heading after the previous stage's in\n" << headings;
    pos = at + stage.size();
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The subst stage says what the search did with --subst, and that it was off without.
// A loop's body is partitioned on its own; the partition dump shows it after the model's, with the
// subgraph ids that continue the model's numbering.
TEST(StageDump, PartitionShowsALoopsBody) {
  testing::TempDir dir;
  testing::RecurrentModel m;
  m.seq = 6;
  ModelBuilder b = testing::recurrent_model(m);
  b.save(dir.path("lstm.onnx"));
  const testing::CliOutput out = testing::run_kiln_output("dump " + dir.path("lstm.onnx") + " --dump-after partition", dir);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("(StepLoop), run 6 times:"), std::string::npos) << out.out;
}
TEST(StageDump, SubstStageShowsTheRewritesOrThatItIsOff) {
  testing::TempDir dir;
  const std::string model = std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx";
  const testing::CliOutput on = testing::run_kiln_output("dump " + model + " --subst --dump-after subst", dir);
  EXPECT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("; after subst"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find(" rewrites, estimated "), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("graph "), std::string::npos) << on.out;
  const testing::CliOutput off = testing::run_kiln_output("dump " + model + " --dump-after subst", dir);
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_NE(off.out.find("substitutions off"), std::string::npos) << off.out;
}

}  // namespace
}  // namespace kiln
