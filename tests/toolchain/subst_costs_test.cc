// Graph costs from tuning records for the substitution search (toolchain/subst_costs.h): the same
// merge of two convs is taken when the records say the merged conv is fast and refused when they say
// it is slow, and a task without a record is priced at the rate of those with one.
#include "toolchain/subst_costs.h"

#include <gtest/gtest.h>

#include "frontend/subst/graph_match.h"
#include "frontend/subst/optimizer.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

using testing::random_weights;


measure::Record record(const std::string& key, const std::string& target, double seconds) {
  measure::Record r;
  r.task_key = key;
  r.target = target;
  r.result.costs = {seconds};
  return r;
}

// The tasks of `g` as compiling it for 512-bit vectors makes them.
std::vector<Task> tasks_of(Graph g) {
  lay_out(g, 512);
  return laid_out_tasks(g);
}

int convs(const Graph& g) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op_type == "Conv"; }));
}

TEST(SubstCosts, RecordsDecideWhetherConvsMerge) {
  ModelBuilder b = testing::two_conv_branches();
  const Graph g = testing::prepared_graph(b);
  // The merged graph, to learn its new task's key.
  const subst::Rule* merge = nullptr;
  for (const subst::Rule& r : subst::merge_rules())
    if (r.name == "merge two relu convs with biases") merge = &r;
  ASSERT_NE(merge, nullptr);
  const std::vector<subst::Match> m = subst::find_matches(g, *merge);
  ASSERT_EQ(m.size(), 1u);
  const std::optional<Graph> merged = subst::apply_match(g, *merge, m[0]);
  ASSERT_TRUE(merged);
  std::set<std::string> before_keys;
  for (const Task& t : tasks_of(g)) before_keys.insert(t.key);
  std::string merged_key;
  for (const Task& t : tasks_of(*merged))
    if (!before_keys.count(t.key)) merged_key = t.key;
  ASSERT_FALSE(merged_key.empty());

  const std::string target = "x86_64-avx512";
  auto search = [&](double merged_seconds) {
    std::vector<measure::Record> records;
    for (const std::string& key : before_keys) records.push_back(record(key, target, 10e-6));
    records.push_back(record(merged_key, target, merged_seconds));
    records.push_back(record(merged_key, "x86_64-avx2", 1e-9));  // another target's record is not read
    subst::SearchOptions o;
    o.cost = subst::roofline_for(512, 1);
    o.measured = record_graph_costs(records, target, 512);
    return subst::optimize_graph_substitutions(g, subst::default_rules(), o);
  };
  // The two 3x3 convs are one task of 2 occurrences at 10 us: 20 us between them.
  const subst::SearchResult fast = search(12e-6);
  EXPECT_EQ(convs(fast.graph), 3) << subst::format_rewrites(fast);
  EXPECT_NEAR(fast.initial_cost - fast.final_cost, 8e-6, 1e-9);
  const subst::SearchResult slow = search(30e-6);
  EXPECT_EQ(convs(slow.graph), 4) << subst::format_rewrites(slow);
  EXPECT_TRUE(slow.log.empty());
}

TEST(SubstCosts, ATaskWithoutARecordRunsAtTheRateOfThoseWithOne) {
  ModelBuilder b = testing::two_conv_branches();
  const Graph g = testing::prepared_graph(b);
  const std::vector<Task> tasks = tasks_of(g);
  ASSERT_GE(tasks.size(), 2u);
  // Every task but the first at 1 ns per FLOP (those with no FLOPs at 1 us): the first costs its FLOPs
  // at the same rate.
  std::vector<measure::Record> records;
  double expected = 0, known_seconds = 0, known_flops = 0;
  for (size_t i = 1; i < tasks.size(); ++i) {
    const double seconds = tasks[i].flops > 0 ? tasks[i].flops * 1e-9 : 1e-6;
    records.push_back(record(tasks[i].key, "t", seconds));
    known_seconds += tasks[i].weight * seconds;
    known_flops += tasks[i].weight * tasks[i].flops;
  }
  expected = known_seconds + tasks[0].weight * tasks[0].flops * (known_seconds / known_flops);
  EXPECT_NEAR(record_graph_costs(records, "t", 512)(g), expected, 1e-12);
  // No record at all: the roofline.
  EXPECT_DOUBLE_EQ(record_graph_costs({}, "t", 512)(g), subst::graph_cost(g, subst::roofline_for(512, 1)));
}

}  // namespace
}  // namespace kiln
