// Lowering a model subgraph by subgraph (scheduler/lower/lower_model): parameters are classified as
// inputs, weights, outputs and workspace; values passed between subgraphs live from their producer to
// their last reader, a subgraph's temporaries only in it; graph outputs no subgraph writes get a copy;
// a custom scheduler is asked once per subgraph and its statements and temporaries are used.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "scheduler/lower/lower_model.h"
#include "tests/frontend/partition/partition_models.h"

namespace kiln {
namespace {

using lower::ModelParam;
using lower::ModelProgram;
using Kind = ModelParam::Kind;
using Buffers = std::map<const te::TensorNode*, lower::BufferRef>;

ModelProgram lower_default(const Graph& g, const SubgraphDAG& sdag) {
  return lower::lower_model(g, sdag, "k", lower::default_subgraph_scheduler({}));
}

// The parameter named `name` (a buffer name), or null.
const ModelParam* param_named(const ModelProgram& p, const std::string& name) {
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.func.params[i]->name == name) return &p.params[i];
  return nullptr;
}

// The default scheduler, recording which temporaries each subgraph created.
struct RecordingScheduler {
  std::map<int, std::set<const lower::Buffer*>> temporaries;
  std::vector<int> calls;
  lower::SubgraphScheduler get() {
    return [this](const LoweredSubgraph& sg, int id, const Buffers& buffers, std::vector<lower::BufferRef>& temps) {
      calls.push_back(id);
      lower::Stmt s = lower::lower_subgraph_default(sg, id, buffers, temps, {});
      for (const lower::BufferRef& b : temps) temporaries[id].insert(b.get());
      return s;
    };
  }
};

TEST(LowerModel, AttentionParamsAreClassified) {
  Graph g = testing::load_built(testing::attention_model());
  SubgraphDAG sdag = partition_graph(g);
  ASSERT_GE(sdag.subgraphs.size(), 2u) << print_subgraph_dag(g, sdag);
  RecordingScheduler rec;
  ModelProgram p = lower::lower_model(g, sdag, "attention", rec.get());
  ASSERT_EQ(p.params.size(), p.func.params.size());
  ASSERT_EQ(p.subgraphs.size(), sdag.subgraphs.size());

  // Inputs in graph order, with their field index and size; the mask is a weight (the scale is a
  // scalar constant the lowering folds into the expression, so it needs no buffer).
  for (int i = 0; i < 3; ++i) {
    const ModelParam* in = param_named(p, g.inputs[static_cast<size_t>(i)]);
    ASSERT_NE(in, nullptr) << g.inputs[static_cast<size_t>(i)];
    EXPECT_EQ(in->kind, Kind::Input);
    EXPECT_EQ(in->io_index, i);
    EXPECT_EQ(in->bytes, 64 * 4);
  }
  const ModelParam* mask = param_named(p, "mask");
  ASSERT_NE(mask, nullptr) << lower::print_model_params(p);
  EXPECT_EQ(mask->kind, Kind::Weight);
  ASSERT_NE(mask->weight, nullptr);
  EXPECT_EQ(mask->bytes, 4 * 4);
  EXPECT_EQ(static_cast<int64_t>(mask->weight->byte_size()), mask->bytes);
  const ModelParam* y = param_named(p, "y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->kind, Kind::Output);
  EXPECT_EQ(y->io_index, 0);
  EXPECT_EQ(y->bytes, 64 * 4);

  // Every workspace buffer is a value between subgraphs (live from producer to last reader) or a
  // temporary of exactly one subgraph (live there only).
  std::map<std::string, std::pair<int, int>> edge_range;
  for (const SubgraphEdge& e : sdag.edges) {
    auto [it, fresh] = edge_range.emplace(e.value, std::pair{e.from, e.to});
    if (!fresh) it->second.second = std::max(it->second.second, e.to);
  }
  // Statement positions: the default schedule gives one statement per stage, except stages stored as
  // a reduction's epilogue (lower_dag.h).
  auto statements = [](const LoweredSubgraph& ls) {
    return static_cast<int>(ls.dag.tensors.size() - lower::plan_epilogues(ls.dag).chain_members.size());
  };
  std::vector<int> start{0};
  for (const LoweredSubgraph& ls : p.subgraphs) start.push_back(start.back() + statements(ls));
  int temporaries = 0;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const ModelParam& m = p.params[i];
    const lower::BufferRef& b = p.func.params[i];
    if (m.kind != Kind::Workspace) continue;
    EXPECT_EQ(m.bytes, b->size * static_cast<int64_t>(dtype_size(b->dtype))) << b->name;
    // Statement ranges refine subgraph ranges.
    EXPECT_LE(m.first_step, m.last_step) << b->name;
    EXPECT_GE(m.first_step, start[static_cast<size_t>(m.live_from)]) << b->name;
    EXPECT_LT(m.last_step, start[static_cast<size_t>(m.live_to) + 1]) << b->name;
    auto edge = edge_range.find(b->name);
    if (edge != edge_range.end()) {
      EXPECT_EQ(m.live_from, edge->second.first) << b->name;
      EXPECT_EQ(m.live_to, edge->second.second) << b->name;
      continue;
    }
    ++temporaries;
    EXPECT_EQ(m.live_from, m.live_to) << b->name;
    EXPECT_TRUE(rec.temporaries[m.live_from].count(b.get())) << b->name << " is not a temporary of subgraph " << m.live_from;
  }
  EXPECT_GT(temporaries, 0) << "softmax's max, exp and sum stages are temporaries\n" << lower::print_model_params(p);
  EXPECT_EQ(edge_range.size(), sdag.subgraphs.size() - 1) << print_subgraph_dag(g, sdag);

  // One statement per stage (less the epilogues), spliced in subgraph order (codegen makes each its
  // own function).
  EXPECT_EQ(static_cast<int>(p.func.body->body.size()), start.back());
}

TEST(LowerModel, CustomSchedulerIsCalledOncePerSubgraphInOrder) {
  Graph g = testing::load_built(testing::residual_blocks_model({{"a.", "x", 6, false, 1}}));
  SubgraphDAG sdag = partition_graph(g);
  ASSERT_GE(sdag.subgraphs.size(), 3u);
  RecordingScheduler rec;
  lower::SubgraphScheduler inner = rec.get();
  std::vector<size_t> given;  // buffers handed to each call
  lower::SubgraphScheduler check = [&](const LoweredSubgraph& sg, int id, const Buffers& buffers,
                                       std::vector<lower::BufferRef>& temps) {
    // Pre-filled: every placeholder the DAG reads and every output, nothing else.
    for (const te::TensorRef& t : sg.dag.placeholders) EXPECT_TRUE(buffers.count(t.get())) << t->name;
    for (const te::TensorRef& t : sg.outputs) EXPECT_TRUE(buffers.count(t.get())) << t->name;
    for (const te::TensorRef& t : sg.dag.tensors) {
      const bool output = std::find(sg.outputs.begin(), sg.outputs.end(), t) != sg.outputs.end();
      EXPECT_TRUE(output || !buffers.count(t.get())) << t->name;
    }
    given.push_back(buffers.size());
    return inner(sg, id, buffers, temps);
  };
  ModelProgram p = lower::lower_model(g, sdag, "k", check);
  std::vector<int> expected;
  for (const Subgraph& sg : sdag.subgraphs) expected.push_back(sg.id);
  EXPECT_EQ(rec.calls, expected);
  EXPECT_EQ(given.size(), sdag.subgraphs.size());

  // The default scheduler through lower_model gives the same program.
  EXPECT_EQ(lower::print_func(p.func), lower::print_func(lower_default(g, sdag).func));
}

TEST(LowerModel, SchedulerStatementsAndTemporariesAreUsed) {
  Graph g = testing::load_built(testing::conv_bias_relu_model());
  SubgraphDAG sdag = partition_graph(g);
  ASSERT_EQ(sdag.subgraphs.size(), 1u);
  // A scheduler that writes its output through a scratch buffer of its own.
  auto scheduler = [](const LoweredSubgraph& sg, int, const Buffers& buffers, std::vector<lower::BufferRef>& temps) {
    const lower::BufferRef& out = buffers.at(sg.outputs[0].get());
    lower::BufferRef tmp = lower::make_buffer("my_tmp", out->dtype, out->size);
    temps.push_back(tmp);
    te::Expr i = te::var("i");
    return lower::block({lower::for_loop(i, out->size, lower::ForKind::Serial, lower::store(tmp, i, te::float_imm(1.0))),
                         lower::for_loop(i, out->size, lower::ForKind::Serial, lower::store(out, i, lower::load(tmp, i)))});
  };
  ModelProgram p = lower::lower_model(g, sdag, "k", scheduler);
  EXPECT_EQ(p.func.body->body.size(), 2u);
  const ModelParam* tmp = param_named(p, "my_tmp");
  ASSERT_NE(tmp, nullptr) << lower::print_model_params(p);
  EXPECT_EQ(tmp->kind, Kind::Workspace);
  EXPECT_EQ(tmp->bytes, 4 * 64 * 4);
  EXPECT_EQ(tmp->live_from, 0);
  EXPECT_EQ(tmp->live_to, 0);
  EXPECT_EQ(lower::print_model_params(p),
            "input 0 x: 768 bytes\n"
            "weight w: 432 bytes\n"
            "weight b: 16 bytes\n"
            "output 0 y: 1024 bytes\n"
            "workspace my_tmp: 1024 bytes, live 0..0 (statements 0..1)\n");

  // Handing back a model buffer as a temporary breaks the contract.
  auto bad = [](const LoweredSubgraph& sg, int, const Buffers& buffers, std::vector<lower::BufferRef>& temps) {
    temps.push_back(buffers.at(sg.outputs[0].get()));
    return lower::block({});
  };
  EXPECT_THROW(lower::lower_model(g, sdag, "k", bad), InternalError);
}

TEST(LowerModel, OutputThatIsAnInputOrAConstantIsCopied) {
  ModelBuilder b("passthrough", 17);
  b.input("x", DType::Float32, Shape{1, 4});
  b.initializer("c", Tensor::scalar_double(DType::Float32, 2.0));
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", DType::Float32, Shape{1, 4});
  b.output("x", DType::Float32, Shape{1, 4});
  b.output("c", DType::Float32, Shape{});
  Graph g = testing::load_built(b);
  SubgraphDAG sdag = partition_graph(g);
  ModelProgram p = lower_default(g, sdag);
  EXPECT_EQ(lower::print_model_params(p),
            "input 0 x: 16 bytes\n"
            "weight c: 4 bytes\n"
            "output 0 y: 16 bytes\n"
            "output 1 x.output1: 16 bytes\n"
            "output 2 c.output2: 4 bytes\n");
  const std::string text = lower::print_func(p.func);
  EXPECT_NE(text.find("x.output1[x.output1.i] = x[x.output1.i]"), std::string::npos) << text;
  EXPECT_NE(text.find("c.output2[c.output2.i] = c[c.output2.i]"), std::string::npos) << text;
  // The copies come last, after the subgraph that computes y.
  EXPECT_LT(text.find("y["), text.find("x.output1["));
}

TEST(LowerModel, ConstantsALoweringMakesAreWeights) {
  ModelBuilder b("compress", 17);
  b.input("x", DType::Float32, Shape{4});
  b.initializer("cond", Tensor::from_ints(DType::Bool, Shape{4}, std::vector<int64_t>{1, 0, 1, 1}));
  b.node("Compress", {"x", "cond"}, {"y"}, "compress");
  b.output("y", DType::Float32, Shape{3});
  Graph g = testing::load_built(b);
  ModelProgram p = lower_default(g, partition_graph(g));
  int tables = 0;
  for (size_t i = 0; i < p.params.size(); ++i) {
    if (p.params[i].kind != Kind::Weight) continue;
    ++tables;
    ASSERT_NE(p.params[i].weight, nullptr);
    EXPECT_EQ(p.params[i].bytes, 3 * 8) << p.func.params[i]->name;  // the kept positions, int64
  }
  EXPECT_EQ(tables, 1) << lower::print_model_params(p);
}

TEST(LowerModel, TopKScratchIsATemporaryOfItsSubgraph) {
  ModelBuilder b("topk", 17);
  b.input("x", DType::Float32, Shape{2, 5});
  b.initializer("k", Tensor::from_ints(DType::Int64, Shape{1}, std::vector<int64_t>{3}));
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("TopK", {"r", "k"}, {"values", "indices"}, "topk");
  b.node("Neg", {"values"}, {"y"}, "neg");
  b.output("y", DType::Float32, Shape{2, 3});
  b.output("indices", DType::Int64, Shape{2, 3});
  Graph g = testing::load_built(b);
  SubgraphDAG sdag = partition_graph(g);
  ModelProgram p = lower_default(g, sdag);
  int topk_position = -1;
  for (size_t k = 0; k < sdag.subgraphs.size(); ++k)
    if (g.nodes[static_cast<size_t>(sdag.subgraphs[k].anchor)].op_type == "TopK") topk_position = static_cast<int>(k);
  ASSERT_GE(topk_position, 0) << print_subgraph_dag(g, sdag);
  int scratch = 0;
  for (size_t i = 0; i < p.params.size(); ++i) {
    if (p.func.params[i]->name.find(".scratch") == std::string::npos) continue;
    ++scratch;
    EXPECT_EQ(p.params[i].kind, Kind::Workspace);
    EXPECT_EQ(p.params[i].live_from, topk_position);
    EXPECT_EQ(p.params[i].live_to, topk_position);
  }
  EXPECT_EQ(scratch, 1) << lower::print_model_params(p);
  const ModelParam* indices = param_named(p, "indices");
  ASSERT_NE(indices, nullptr);
  EXPECT_EQ(indices->kind, Kind::Output);
  EXPECT_EQ(indices->io_index, 1);
  // values: written by the TopK subgraph, read by the next.
  const ModelParam* values = param_named(p, "values");
  ASSERT_NE(values, nullptr) << lower::print_model_params(p);
  EXPECT_EQ(values->kind, Kind::Workspace);
  EXPECT_EQ(values->live_from, topk_position);
  EXPECT_GT(values->live_to, topk_position);
  const std::string text = lower::print_func(p.func);
  EXPECT_NE(text.find("call kiln_rt_topk("), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
