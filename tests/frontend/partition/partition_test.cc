// Fusion into subgraphs: anchors absorb their elementwise consumers, reductions keep their own
// chain, several consumers end a group, the result does not depend on the file's node order, and
// every SubgraphDAG is well formed (each run-time node in one subgraph, at most one anchor each,
// producers first).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "frontend/partition/partition.h"
#include "frontend/zoo/weights.h"
#include "tests/frontend/partition/partition_models.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::load_built;

// "name name name" per subgraph: the grouping at a glance.
std::vector<std::string> groups_of(const Graph& g, const SubgraphDAG& dag) {
  std::vector<std::string> out;
  for (const Subgraph& sg : dag.subgraphs) {
    std::string s;
    for (int gi : sg.nodes) s += (s.empty() ? "" : " ") + g.nodes[gi].name;
    out.push_back(s);
  }
  return out;
}

// The structural facts every partition must satisfy.
void expect_well_formed(const Graph& g, const SubgraphDAG& dag) {
  std::map<int, int> subgraph_of_node;
  for (const Subgraph& sg : dag.subgraphs) {
    int anchors = 0;
    for (int gi : sg.nodes) {
      EXPECT_TRUE(subgraph_of_node.emplace(gi, sg.id).second) << g.nodes[gi].name << " is in two subgraphs";
      if (is_anchor_pattern(node_op_pattern(g.nodes[gi]))) ++anchors;
    }
    EXPECT_LE(anchors, 1) << "subgraph " << sg.id << " has " << anchors << " anchors";
    EXPECT_FALSE(sg.outputs.empty()) << "subgraph " << sg.id << " computes nothing anyone reads";
  }
  for (size_t gi = 0; gi < g.nodes.size(); ++gi)
    EXPECT_EQ(subgraph_of_node.count(static_cast<int>(gi)), is_runtime_node(g, g.nodes[gi]) ? 1u : 0u)
        << g.nodes[gi].name;
  for (const SubgraphEdge& e : dag.edges) EXPECT_LT(e.from, e.to) << "edge " << e.value << " goes backwards";
}

const Subgraph& only_subgraph(const SubgraphDAG& dag) {
  EXPECT_EQ(dag.subgraphs.size(), 1u);
  return dag.subgraphs.at(0);
}

TEST(Partition, ConvBiasReluIsOneSubgraph) {
  Graph g = load_built(testing::conv_bias_relu_model());
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  EXPECT_EQ(print_subgraph_dag(g, dag),
            "subgraphs 1 (from 2 nodes)\n"
            "subgraph 0 out-elemwise-fusable, anchor conv (Conv)\n"
            "  nodes   conv:Conv relu:Relu\n"
            "  input   x: float32[1x3x8x8]\n"
            "  input   w: float32[4x3x3x3] const\n"
            "  input   b: float32[4] const\n"
            "  output  y: float32[1x4x8x8]\n"
            "edges\n");
}

TEST(Partition, MatMulBiasGeluIsOneSubgraph) {
  Graph g = load_built(testing::matmul_add_gelu_model());
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  const Subgraph& sg = only_subgraph(dag);
  EXPECT_EQ(sg.nodes.size(), 7u);
  EXPECT_EQ(g.nodes[sg.anchor].op_type, "MatMul");
  EXPECT_EQ(sg.pattern, OpPattern::OutEWiseFusable);
}

TEST(Partition, SoftmaxKeepsItsOwnReductionChain) {
  // The score scaling and mask fuse into the QK^T matmul; Softmax, a reduction, fuses into nothing
  // after it, and the PV matmul is an anchor of its own.
  Graph g = load_built(testing::attention_model());
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  EXPECT_EQ(groups_of(g, dag), (std::vector<std::string>{"qk scale mask", "softmax", "pv"}));
  EXPECT_EQ(dag.subgraphs[1].pattern, OpPattern::CommReduce);
}

// x -> Mul(x, x) -> ReduceSum -> Sqrt: the square is read by the reduction, Sqrt follows alone.
TEST(Partition, ElementwiseFusesIntoTheReductionItFeeds) {
  ModelBuilder b("l2", 17);
  b.input("x", DType::Float32, Shape{2, 8});
  b.initializer("axes", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{1}));
  b.node("Mul", {"x", "x"}, {"sq"}, "square");
  b.node("ReduceSum", {"sq", "axes"}, {"ss"}, "sum");
  b.node("Sqrt", {"ss"}, {"y"}, "sqrt");
  b.output("y", DType::Float32, Shape{2, 1});
  Graph g = load_built(b);
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  EXPECT_EQ(groups_of(g, dag), (std::vector<std::string>{"square sum", "sqrt"}));
}

// Softmax spelled out: two reductions, so never one subgraph.
TEST(Partition, TwoReductionsNeverShareASubgraph) {
  ModelBuilder b("softmax_spelled_out", 17);
  b.input("x", DType::Float32, Shape{2, 8});
  b.initializer("axes", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{1}));
  b.node("ReduceMax", {"x"}, {"m"}, "max").attr("axes", std::vector<int64_t>{1});  // an input from opset 18
  b.node("Sub", {"x", "m"}, {"d"}, "sub");
  b.node("Exp", {"d"}, {"e"}, "exp");
  b.node("ReduceSum", {"e", "axes"}, {"s"}, "sum");
  b.node("Div", {"e", "s"}, {"y"}, "div");
  b.output("y", DType::Float32, Shape{2, 8});
  Graph g = load_built(b);
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  EXPECT_EQ(groups_of(g, dag), (std::vector<std::string>{"max", "sub exp", "sum", "div"}));
}

ModelBuilder relu_with_two_consumers(bool rejoin) {
  WeightInit w(3);
  ModelBuilder b("two_consumers", 17);
  b.input("x", DType::Float32, Shape{1, 2, 4, 4});
  b.initializer("w", w.he_uniform({2, 2, 1, 1}, 2));
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  b.node("Relu", {"c"}, {"r"}, "relu");
  b.node("Sigmoid", {"r"}, {"s"}, "sigmoid");
  b.node("Tanh", {"r"}, {"t"}, "tanh");
  if (rejoin) {
    b.node("Mul", {"s", "t"}, {"y"}, "mul");
    b.output("y", DType::Float32, Shape{1, 2, 4, 4});
  } else {
    b.output("s", DType::Float32, Shape{1, 2, 4, 4});
    b.output("t", DType::Float32, Shape{1, 2, 4, 4});
  }
  return b;
}

TEST(Partition, SeveralConsumersEndAGroupUnlessAllAreFused) {
  Graph split = load_built(relu_with_two_consumers(false));
  SubgraphDAG dag = partition_graph(split);
  expect_well_formed(split, dag);
  EXPECT_EQ(groups_of(split, dag), (std::vector<std::string>{"conv relu", "sigmoid", "tanh"}));
  EXPECT_EQ(dag.subgraphs[0].outputs, (std::vector<std::string>{"r"}));
  EXPECT_EQ(dag.edges.size(), 2u);

  Graph rejoined = load_built(relu_with_two_consumers(true));
  dag = partition_graph(rejoined);
  expect_well_formed(rejoined, dag);
  EXPECT_EQ(groups_of(rejoined, dag), (std::vector<std::string>{"conv relu sigmoid tanh mul"}));
}

TEST(Partition, ResidualBlockGroupingIgnoresNodeOrder) {
  // The Add's first operand (the main branch) absorbs it, whichever conv the file lists first.
  for (bool shortcut_first : {false, true}) {
    Graph g = load_built(testing::residual_blocks_model({{"b.", "x", 6, shortcut_first, 1}}));
    SubgraphDAG dag = partition_graph(g);
    expect_well_formed(g, dag);
    std::set<std::string> groups;
    for (const std::string& s : groups_of(g, dag)) groups.insert(s);
    EXPECT_EQ(groups, (std::set<std::string>{"b.conv1 b.relu1", "b.conv2 b.add b.relu_out", "b.shortcut_conv"}))
        << "shortcut_first " << shortcut_first;
  }
}

TEST(Partition, PassThroughNodesAndInjectiveChains) {
  // Transpose -> Reshape form one injective subgraph; the MatMul after them is its own anchor.
  ModelBuilder b("injective", 17);
  b.input("x", DType::Float32, Shape{2, 3, 4});
  b.initializer("shape", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{4, 6}));
  b.initializer("w", WeightInit(4).he_uniform({6, 5}, 6));
  b.node("Transpose", {"x"}, {"t"}, "transpose").attr("perm", std::vector<int64_t>{2, 0, 1});
  b.node("Reshape", {"t", "shape"}, {"r"}, "reshape");
  b.node("MatMul", {"r", "w"}, {"y"}, "matmul");
  b.output("y", DType::Float32, Shape{4, 5});
  Graph g = load_built(b);
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  EXPECT_EQ(groups_of(g, dag), (std::vector<std::string>{"transpose reshape", "matmul"}));
}

struct ZooCase {
  const char* name;
  int64_t size;
};

class ZooPartition : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooPartition, IsWellFormed) {
  ZooOptions opts;
  opts.size = GetParam().size;
  Graph g = testing::load_zoo(GetParam().name, opts);
  SubgraphDAG dag = partition_graph(g);
  expect_well_formed(g, dag);
  std::printf("[ partition ] %s: %zu nodes -> %zu subgraphs\n", GetParam().name, g.nodes.size(), dag.subgraphs.size());
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooPartition,
                         ::testing::Values(ZooCase{"tiny_cnn", 0}, ZooCase{"resnet18", 32}, ZooCase{"resnet50", 32},
                                           ZooCase{"mobilenet_v2", 32}, ZooCase{"dcgan", 0}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Partition, ResNet18FusesEveryBatchNormAndRelu) {
  ZooOptions opts;
  opts.size = 32;
  Graph g = testing::load_zoo("resnet18", opts);
  SubgraphDAG dag = partition_graph(g);
  for (const Subgraph& sg : dag.subgraphs) {
    const std::string anchor = g.nodes[sg.anchor].op_type;
    EXPECT_TRUE(anchor == "Conv" || anchor == "MaxPool" || anchor == "GlobalAveragePool" || anchor == "Gemm" ||
                anchor == "Flatten")
        << "subgraph " << sg.id << " is anchored by " << anchor;
  }
}

TEST(Partition, DumpAfterPartitionPrintsTheSubgraphs) {
  testing::TempDir dir;
  testing::conv_bias_relu_model().save(dir.path("m.onnx"));
  const std::string out = dir.path("dump.txt");
  int status = std::system((std::string(KILN_BINARY) + " dump " + dir.path("m.onnx") + " --dump-after partition >" +
                            out + " 2>&1").c_str());
  ASSERT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(out.c_str(), "r"), &std::fclose);
  ASSERT_TRUE(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f.get())) text += buf;
  // After the layout stage: the blocked conv with its Relu fused, between the two reorders.
  EXPECT_NE(text.find("; after partition\nsubgraphs 3 (from 4 nodes)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  nodes   conv:ConvBlocked relu:Relu\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
