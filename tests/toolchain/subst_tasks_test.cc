// The tasks `kiln tune --subst` tunes (toolchain/subst_tasks.h): both sides of every rewrite the
// search keeps, so records can decide each of them; and those of the search ranked by records.
#include "toolchain/subst_tasks.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

using testing::random_weights;


std::map<std::string, int64_t> weights_by_key(const std::vector<Task>& tasks) {
  std::map<std::string, int64_t> out;
  for (const Task& t : tasks) out[t.key] = t.weight;
  return out;
}

TEST(SubstTasks, BothSidesOfEveryKeptRewriteAreTuned) {
  ModelBuilder b = testing::two_conv_branches();
  const Graph g = testing::prepared_graph(b);
  const auto off = weights_by_key(target_tasks(g, 512, false)), on = weights_by_key(target_tasks(g, 512, true));
  ASSERT_NE(off, on) << "the search merges nothing here: the test needs a rewrite";
  const auto both = weights_by_key(subst_variant_tasks(g, 512));
  for (const auto* side : {&off, &on})
    for (const auto& [key, weight] : *side) {
      ASSERT_TRUE(both.count(key)) << key;
      EXPECT_GE(both.at(key), weight) << key;
    }
  // A task of both graphs weighs what it weighs in one of them: they are alternatives.
  for (const auto& [key, weight] : both) EXPECT_EQ(weight, std::max(off.count(key) ? off.at(key) : 0, on.count(key) ? on.at(key) : 0)) << key;
}

// The search ranked by another cost keeps other rewrites: their steps are tuned too. Here convs of one
// input, one with a relu and one without: merging them takes the relu out of the conv's epilogue,
// which the roofline refuses; a cost that pays for every Slice (a merge's split) takes it.
TEST(SubstTasks, TheRecordsRankedSearchAddsItsOwnSteps) {
  ModelBuilder b("relu_and_plain");
  b.input("x", DType::Float32, Shape{1, 16, 8, 8});
  for (const char* name : {"r", "p"}) {
    b.initializer(std::string(name) + ".w", random_weights({32, 16, 3, 3}, name[0] == 'r' ? 1 : 3));
    b.initializer(std::string(name) + ".b", random_weights({32}, name[0] == 'r' ? 2 : 4));
    b.node("Conv", {"x", std::string(name) + ".w", std::string(name) + ".b"}, {std::string(name) + ".conv"})
        .attr("pads", std::vector<int64_t>(4, 1));
  }
  b.node("Relu", {"r.conv"}, {"r"});
  b.output("r", DType::Float32, Shape{1, 32, 8, 8});
  b.output("p.conv", DType::Float32, Shape{1, 32, 8, 8});
  const Graph g = testing::prepared_graph(b);
  const auto roofline_only = weights_by_key(subst_variant_tasks(g, 512));
  EXPECT_EQ(roofline_only, weights_by_key(target_tasks(g, 512, false))) << "the roofline merges nothing";
  const std::function<double(const Graph&)> slices_pay = [](const Graph& x) {
    double cost = 1.0;
    for (const Node& n : x.nodes) cost -= n.op_type == "Slice" ? 0.1 : 0.0;
    return cost;
  };
  const auto both = weights_by_key(subst_variant_tasks(g, 512, slices_pay));
  for (const auto& [key, weight] : roofline_only) EXPECT_TRUE(both.count(key)) << key;
  EXPECT_GT(both.size(), roofline_only.size()) << "the merged conv's task";
}

}  // namespace
}  // namespace kiln
