// The subgraph order for memory (scheduler/lower/memory_order.h): on two branches the graph lists
// interleaved, the search runs one branch to its end first, its peak in the model is what the memory
// plan of the program lowered in that order reaches, and the program in that order plans smaller.
// `kiln compile --max-sram` uses it; the package then computes what the graph's order computes.
#include "scheduler/lower/memory_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "backends/package/memory_plan.h"
#include "frontend/ir/error.h"
#include "frontend/zoo/weights.h"
#include "tests/frontend/partition/partition_models.h"
#include "tests/frontend/test_models.h"

namespace kiln::package {
namespace {

using lower::MemoryOrder;
using lower::order_for_memory;

// x[1,16] -> MatMul to 1024 wide -> MatMul to 4 wide, on two branches, added: the nodes listed
// breadth first, so in the graph's order both 4 KiB intermediates are live at once.
ModelBuilder two_branches() {
  WeightInit w(3);
  ModelBuilder b("two_branches", 17);
  b.input("x", DType::Float32, Shape{1, 16});
  for (const char* br : {"a", "b"}) {
    b.initializer(std::string(br) + ".w1", w.he_uniform({16, 1024}, 16));
    b.initializer(std::string(br) + ".w2", w.he_uniform({1024, 4}, 1024));
  }
  b.node("MatMul", {"x", "a.w1"}, {"a.h"}, "a.mm1");
  b.node("MatMul", {"x", "b.w1"}, {"b.h"}, "b.mm1");
  b.node("MatMul", {"a.h", "a.w2"}, {"a.y"}, "a.mm2");
  b.node("MatMul", {"b.h", "b.w2"}, {"b.y"}, "b.mm2");
  b.node("Add", {"a.y", "b.y"}, {"y"}, "add");
  b.output("y", DType::Float32, Shape{1, 4});
  return b;
}

lower::ModelProgram lower_in(const Graph& g, const SubgraphDAG& sdag, const std::vector<int>& order = {}) {
  return lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}), {}, order);
}

TEST(MemoryOrder, RunsABranchToItsEndBeforeStartingTheNext) {
  const Graph g = testing::load_built(two_branches());
  const SubgraphDAG sdag = partition_graph(g);
  const lower::ModelProgram given = lower_in(g, sdag);
  const MemoryOrder order = order_for_memory(given, sdag, kWorkspaceAlign);
  ASSERT_EQ(order.order.size(), sdag.subgraphs.size()) << print_subgraph_dag(g, sdag);
  EXPECT_EQ(order.peak_given, plan_model_memory(given).lower_bound);
  EXPECT_LT(order.peak, order.peak_given);
  // Each first MatMul's subgraph is followed at once by the subgraph reading its 4 KiB output.
  for (const char* h : {"a.h", "b.h"}) {
    const auto edge = std::find_if(sdag.edges.begin(), sdag.edges.end(), [&](const SubgraphEdge& e) { return e.value == h; });
    ASSERT_NE(edge, sdag.edges.end()) << h << "\n" << print_subgraph_dag(g, sdag);
    const auto at = std::find(order.order.begin(), order.order.end(), edge->from);
    ASSERT_NE(at + 1, order.order.end());
    EXPECT_EQ(*(at + 1), edge->to) << h << "\n" << print_subgraph_dag(g, sdag);
  }

  const lower::ModelProgram reordered = lower_in(g, sdag, order.order);
  const ModelMemoryPlan plan = plan_model_memory(reordered);
  EXPECT_EQ(plan.lower_bound, order.peak);
  EXPECT_LT(plan.size, plan_model_memory(given).size);
}

TEST(MemoryOrder, AChainHasOneOrder) {
  const Graph g = testing::load_built(testing::conv_bias_relu_model());
  const SubgraphDAG sdag = partition_graph(g);
  const lower::ModelProgram p = lower_in(g, sdag);
  const MemoryOrder order = order_for_memory(p, sdag, kWorkspaceAlign);
  std::vector<int> graph_order(sdag.subgraphs.size());
  for (size_t k = 0; k < graph_order.size(); ++k) graph_order[k] = static_cast<int>(k);
  EXPECT_EQ(order.order, graph_order);
  EXPECT_EQ(order.peak, order.peak_given);
}

TEST(MemoryOrder, AnOrderThatReadsBeforeItWritesIsRefused) {
  const Graph g = testing::load_built(two_branches());
  const SubgraphDAG sdag = partition_graph(g);
  std::vector<int> backwards;
  for (size_t k = sdag.subgraphs.size(); k > 0; --k) backwards.push_back(static_cast<int>(k - 1));
  EXPECT_THROW(lower_in(g, sdag, backwards), InternalError);
  EXPECT_THROW(lower_in(g, sdag, {0}), InternalError);
}

// The compile under --max-sram: the arena shrinks, the memory report says so, and the package's outputs are
// those of the package in the graph's order, digit for digit (the order changes no arithmetic).
TEST(MemoryOrder, CompileUnderALimitReordersAndComputesTheSame) {
  testing::TempDir dir;
  const std::string model = dir.path("two_branches.onnx");
  {
    const std::string bytes = two_branches().serialize();
    std::ofstream(model, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const testing::CliOutput plain = testing::run_kiln_output("compile " + model + " -o " + dir.path("plain"), dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const testing::CliOutput limited =
      testing::run_kiln_output("compile " + model + " --max-sram 1M -o " + dir.path("limited"), dir);
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_EQ(plain.out.find("subgraphs reordered"), std::string::npos) << plain.out;
  EXPECT_NE(limited.out.find("subgraphs reordered for memory: arena"), std::string::npos) << limited.out;
  for (const char* pkg : {"plain", "limited"}) {
    const testing::CliOutput o = testing::run_kiln_output(
        "run " + dir.path(pkg) + " --seed 4 --output-dir " + dir.path(std::string(pkg) + "_out"), dir);
    ASSERT_EQ(o.exit_code, 0) << o.err;
  }
  // The written tensors, not the printed text: that ends with a time, which no two runs share.
  const auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string a = bytes_of(dir.path("plain_out/output_0.pb"));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, bytes_of(dir.path("limited_out/output_0.pb")));
}

}  // namespace
}  // namespace kiln::package
