// Task extraction: identical subgraphs are one task whatever their names and node order, shapes
// change the key, keys are stable, FLOPs counted from the stages agree with the per-op formulas, and
// every subgraph's lowered DAG computes what the reference interpreter computes for the same values.
// (The op pattern table against the lowerings: tests/scheduler/te/op_consistency_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "frontend/ops/op_registry.h"
#include "frontend/partition/partition.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/tasks/dag_flops.h"
#include "scheduler/tasks/lower_subgraph.h"
#include "scheduler/tasks/task.h"
#include "scheduler/tasks/workload_key.h"
#include "scheduler/te/te_eval.h"
#include "tests/frontend/partition/partition_models.h"

namespace kiln {
namespace {

using testing::BlockSpec;
using testing::load_built;

std::vector<Task> tasks_of(const Graph& g) { return extract_tasks(g, partition_graph(g)); }

TEST(Tasks, IdenticalResidualBlocksAreOneTaskWithWeightTwo) {
  // Same computation, different names, weights and node order.
  Graph one = load_built(testing::residual_blocks_model({{"a.", "x", 6, false, 1}}));
  Graph two = load_built(testing::residual_blocks_model(
      {{"first_block/", "x1", 6, false, 1}, {"zz_", "x2", 6, true, 99}}));
  std::vector<Task> single = tasks_of(one), pair = tasks_of(two);
  ASSERT_EQ(single.size(), 3u);
  ASSERT_EQ(pair.size(), 3u);
  for (size_t i = 0; i < pair.size(); ++i) {
    EXPECT_EQ(pair[i].weight, 2) << pair[i].canonical;
    EXPECT_EQ(pair[i].key, single[i].key);
    EXPECT_EQ(pair[i].subgraphs.size(), 2u);
  }
}

TEST(Tasks, ADifferentShapeIsADifferentTask) {
  Graph g = load_built(testing::residual_blocks_model({{"a.", "x1", 6, false, 1}, {"b.", "x2", 8, false, 1}}));
  std::vector<Task> tasks = tasks_of(g);
  ASSERT_EQ(tasks.size(), 6u);
  std::set<std::string> keys;
  for (const Task& t : tasks) {
    EXPECT_EQ(t.weight, 1);
    keys.insert(t.key);
  }
  EXPECT_EQ(keys.size(), 6u);
}

// The key of conv(3->4, 3x3, pad 1) + bias + ReLU on 1x3x8x8. It is a hash of the canonical text
// below, so it changes exactly when the lowering of Conv, Relu or that text changes: then tuning
// records keyed by the old value no longer apply, and this golden value must be updated on purpose.
TEST(Tasks, KeyIsStableAndCanonicalTextHasNoNames) {
  Graph g = load_built(testing::conv_bias_relu_model());
  std::vector<Task> tasks = tasks_of(g);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].canonical,
            "p0 = placeholder float32 [1x3x8x8]\n"
            "p1 = placeholder float32 [4x3x3x3] const\n"
            "p2 = placeholder float32 [4] const\n"
            "s0[i0, i1, i2, i3] = select(&&(&&(>=(-(i2, int64:1), int64:0), <(-(i2, int64:1), int64:8)), "
            "&&(>=(-(i3, int64:1), int64:0), <(-(i3, int64:1), int64:8))), "
            "p0[i0, i1, -(i2, int64:1), -(i3, int64:1)], float32:0) : pad float32 [1x3x10x10]\n"
            "s1[i0, i1, i2, i3] = sum(r0:3, r1:3, r2:3; init float32:0) "
            "*(s0[i0, r0, +(i2, r1), +(i3, r2)], p1[i1, r0, r1, r2]) : conv float32 [1x4x8x8]\n"
            "s2[i0, i1, i2, i3] = +(s1[i0, i1, i2, i3], p2[i1]) : broadcast float32 [1x4x8x8]\n"
            "s3[i0, i1, i2, i3] = max(s2[i0, i1, i2, i3], float32:0) : elementwise float32 [1x4x8x8]\n"
            "outputs s3\n");
  EXPECT_EQ(tasks[0].key, fnv1a64_hex(tasks[0].canonical));
  EXPECT_EQ(tasks[0].key, "501a3c0f7d4291fc");
  EXPECT_EQ(fnv1a64_hex(""), "cbf29ce484222325");  // FNV-1a 64's offset basis
  EXPECT_EQ(tasks[0].anchor, "Conv");
  EXPECT_EQ(tasks[0].node_names, (std::vector<std::string>{"conv", "relu"}));
}

TEST(Tasks, FlopsCountTwoPerMultiplyAddAndOnePerElementwiseOp) {
  Graph g = load_built(testing::conv_bias_relu_model());
  std::vector<Task> tasks = tasks_of(g);
  const double outputs = 1 * 4 * 8 * 8;
  EXPECT_EQ(tasks.at(0).flops, outputs * (3 * 3 * 3) * 2 + outputs /* bias */ + outputs /* relu */);
}

double op_level_flops(const Graph& g) {
  double total = 0;
  for (const Node& n : g.nodes) {
    if (!is_runtime_node(g, n)) continue;
    const OpDef* op = find_op(n.domain, n.op_type);
    if (!op || !op->flops) continue;
    NodeShapes s{n, {}, {}};
    for (const auto& in : n.inputs) s.in.push_back(in.empty() ? Shape{} : g.value(in).shape);
    for (const auto& o : n.outputs) s.out.push_back(o.empty() ? Shape{} : g.value(o).shape);
    total += op->flops(s);
  }
  return total;
}

struct ZooTaskCase {
  const char* name;
  int64_t size;
  size_t max_tasks;
};

class ZooTasks : public ::testing::TestWithParam<ZooTaskCase> {};

TEST_P(ZooTasks, FewTasksAndFlopsAgreeWithTheOpLevelCount) {
  const ZooTaskCase& c = GetParam();
  ZooOptions opts;
  opts.size = c.size;
  Graph g = testing::load_zoo(c.name, opts);
  SubgraphDAG dag = partition_graph(g);
  std::vector<Task> tasks = extract_tasks(g, dag);
  double total = 0;
  size_t occurrences = 0;
  for (const Task& t : tasks) {
    total += t.weight * t.flops;
    occurrences += t.subgraphs.size();
  }
  double op_level = op_level_flops(g);
  std::printf("[ tasks ] %s --size %lld: %zu nodes, %zu subgraphs, %zu tasks; flops %.0f vs op-level %.0f\n", c.name,
              static_cast<long long>(c.size), g.nodes.size(), dag.subgraphs.size(), tasks.size(), total, op_level);
  EXPECT_EQ(occurrences, dag.subgraphs.size());
  EXPECT_LE(tasks.size(), c.max_tasks);
  EXPECT_NEAR(total / op_level, 1.0, 0.04);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTasks,
                         ::testing::Values(ZooTaskCase{"resnet18", 32, 30}, ZooTaskCase{"resnet50", 32, 40},
                                           ZooTaskCase{"mobilenet_v2", 32, 40}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Subgraph DAGs compute what the nodes compute -----------------------------------------------------------

Tensor random_tensor(DType t, const Shape& shape, std::mt19937_64& rng) {
  Tensor out(t, shape);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int64_t i = 0; i < out.size(); ++i) out.set_double(i, dist(rng));
  return out;
}

// Runs the reference interpreter with every run-time value as an output, then evaluates each
// subgraph's lowered DAG on the reference's values of its inputs and compares its outputs.
void expect_subgraphs_match_reference(const Graph& g) {
  std::mt19937_64 rng(5);
  std::map<std::string, Tensor> inputs;
  for (const std::string& in : g.inputs) inputs[in] = random_tensor(g.value(in).dtype, g.value(in).shape, rng);
  Graph all = g;
  all.outputs.clear();
  for (const Node& n : g.nodes)
    if (is_runtime_node(g, n))
      for (const auto& o : n.outputs)
        if (!o.empty()) all.outputs.push_back(o);
  std::vector<Tensor> values = run_reference(all, inputs);
  std::map<std::string, Tensor> value_of = inputs;
  for (size_t i = 0; i < all.outputs.size(); ++i) value_of[all.outputs[i]] = values[i];

  SubgraphDAG dag = partition_graph(g);
  for (const Subgraph& sg : dag.subgraphs) {
    LoweredSubgraph ls = lower_subgraph(g, sg);
    std::map<const te::TensorNode*, Tensor> feed;
    for (const auto& [name, placeholder] : ls.inputs)
      if (!placeholder->constant) feed[placeholder.get()] = value_of.at(name);
    std::vector<Tensor> got = te::evaluate(ls.dag, feed);
    ASSERT_EQ(got.size(), sg.outputs.size());
    for (size_t k = 0; k < got.size(); ++k) {
      const Tensor& want = value_of.at(sg.outputs[k]);
      ASSERT_EQ(got[k].shape(), want.shape()) << sg.outputs[k];
      for (int64_t i = 0; i < want.size(); ++i) {
        double w = want.get_double(i), v = got[k].get_double(i);
        ASSERT_NEAR(v, w, 1e-5 + 1e-5 * std::abs(w)) << "subgraph " << sg.id << " output " << sg.outputs[k] << " [" << i << "]";
      }
    }
  }
}

TEST(SubgraphDags, ComputeWhatTheReferenceComputes) {
  expect_subgraphs_match_reference(load_built(testing::conv_bias_relu_model()));
  expect_subgraphs_match_reference(load_built(testing::matmul_add_gelu_model()));
  expect_subgraphs_match_reference(load_built(testing::attention_model()));
  expect_subgraphs_match_reference(load_built(testing::residual_blocks_model({{"a.", "x1", 6, false, 1}, {"b.", "x2", 6, true, 2}})));
  expect_subgraphs_match_reference(load_built(testing::tiny_transformer_model()));
  expect_subgraphs_match_reference(testing::load_zoo("tiny_cnn", {}));
}

// At 8x8 the element-by-element evaluator takes about a second; the fused blocks are the same as at
// any size (layer3 and layer4 run on 1x1 maps).
TEST(SubgraphDags, ResNet18ComputesWhatTheReferenceComputes) {
  ZooOptions opts;
  opts.size = 8;
  expect_subgraphs_match_reference(testing::load_zoo("resnet18", opts));
}

}  // namespace
}  // namespace kiln
