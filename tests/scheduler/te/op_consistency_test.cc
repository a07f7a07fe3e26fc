// An op is described in three places: its OpDef (frontend/ops: inference, reference kernel, FLOPs),
// its TE lowering (scheduler/te/ops) and its row in the fusion pattern table (frontend/partition:
// the partitioner needs it before anything is lowered, and the frontend may not see the scheduler).
// These tests walk every op and hold the three together: each OpDef has a lowering and each lowering
// an OpDef; the table names only registered ops; and the pattern the table gives a node agrees with
// the stage tags of the node's lowering, on the zoo models and on every ONNX node test that imports.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "frontend/ops/op_registry.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/partition/op_pattern.h"
#include "frontend/partition/partition.h"
#include "scheduler/tasks/lower_subgraph.h"
#include "scheduler/te/narrow_codes.h"
#include "scheduler/te/op_lowering.h"
#include "tests/frontend/partition/partition_models.h"
#include "tests/frontend/test_models.h"
#include "toolchain/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string op_name(const std::string& domain, const std::string& op_type) {
  return domain.empty() ? op_type : domain + "." + op_type;
}

TEST(OpConsistency, EveryOpDefHasALoweringAndEveryLoweringAnOpDef) {
  std::vector<std::string> missing;
  for (const OpDef* d : all_ops())
    if (!te::find_lowering(d->domain, d->op_type)) missing.push_back("no lowering: " + op_name(d->domain, d->op_type));
  for (const te::OpLowering* l : te::all_lowerings())
    if (!find_op(l->domain, l->op_type)) missing.push_back("no OpDef: " + op_name(l->domain, l->op_type));
  EXPECT_GT(all_ops().size(), 150u);
  std::string report;
  for (const auto& m : missing) report += m + "\n";
  EXPECT_TRUE(missing.empty()) << report;
}

TEST(OpConsistency, ThePatternTableNamesOnlyRegisteredOpsOnce) {
  std::set<std::string> seen;
  for (const auto& [op, pattern] : op_pattern_table_rows()) {
    EXPECT_NE(find_op("", op), nullptr) << "the pattern table names '" << op << "', which is no registered op";
    EXPECT_TRUE(seen.insert(op).second) << "'" << op << "' has two rows in the pattern table";
    EXPECT_NE(pattern, OpPattern::Opaque) << op << ": Opaque is the default; a row for it says nothing";
  }
}

// ---- The table against the lowerings' stage tags ------------------------------------------------------

OpPattern pattern_from_stage_tags(const te::ComputeDAG& dag) {
  OpPattern p = OpPattern::ElemWise;
  for (const te::TensorRef& t : dag.tensors) {
    if (te::is_storage_stage(*t->stage)) continue;  // a narrow type's packing, no op's computation
    const std::string& tag = t->stage->tag;
    OpPattern s = tag == "extern"                                     ? OpPattern::Opaque
                  : tag == "conv" || tag == "matmul" || tag == "pool" ? OpPattern::OutEWiseFusable
                  : tag == "reduction"                                ? OpPattern::CommReduce
                  : tag == "injective"                                ? OpPattern::Injective
                  : tag == "broadcast"                                ? OpPattern::Broadcast
                                                                      : OpPattern::ElemWise;
    p = combine_patterns(p, s);
  }
  return p;
}

// The table may say Broadcast where a lowering saw equal shapes and tagged its stage elementwise
// (the partitioner makes such an edge elementwise too).
bool table_agrees(OpPattern table, OpPattern tags) {
  return table == tags || (table == OpPattern::Broadcast && tags == OpPattern::ElemWise);
}

// Ops whose table pattern is coarser (less fusable) than their lowering's tags. That is safe, the
// partitioner only fuses less, but it costs fusion, so each is listed with why; a new op that lands
// here by omission (Opaque is the default) fails the test until it gets a row or a line here.
const std::map<std::string, const char*>& coarser_than_lowering() {
  static const std::map<std::string, const char*> ops = {
      {"Expand", "a broadcast filed Injective: moving it changes partitions and task keys, so it waits for a measured change"},
      {"Einsum", "an anchor whatever its equation: some equations lower to a transpose or a plain reduction"},
      {"ReduceSum", "with noop_with_empty_axes and no axes it lowers to a copy"},
      // Outside ai.onnx (training and ai.onnx.ml domains): rare in inference graphs, so fusing them
      // is not worth a row until a model needs it.
      {"ai.onnx.preview.training.Adam", "training domain"},
      {"ai.onnx.preview.training.Adagrad", "training domain"},
      {"ai.onnx.preview.training.Momentum", "training domain"},
      {"ai.onnx.ml.ArrayFeatureExtractor", "ml domain"},
      {"ai.onnx.ml.Binarizer", "ml domain"},
      // The compile pipeline expands these into MatMuls and element-wise ops before partitioning
      // (frontend/passes/expand_recurrent.h); their lowering, for the te engine, is that expansion.
      {"LSTM", "expanded before partitioning"},
      {"GRU", "expanded before partitioning"},
      {"RNN", "expanded before partitioning"},
      // A run-time If's output: a copy of one branch's value. Alone it is no worse than fused, and
      // fusing it would mix nodes of both branches' guards into one subgraph.
      {"kiln.IfMerge", "picks between guarded branches"},
      // Not in the table (Opaque by default): whether fusing them pays has not been measured.
      {"Attention", "no row yet"},
      {"DeformConv", "no row yet"},
      {"RoiAlign", "no row yet"},
      {"GridSample", "no row yet"},
      {"AffineGrid", "no row yet"},
      {"Col2Im", "no row yet"},
      {"Compress", "no row yet"},
      {"CumSum", "no row yet"},
      {"CumProd", "no row yet"},
      {"DFT", "no row yet"},
      {"STFT", "no row yet"},
      {"MelWeightMatrix", "no row yet"},
      {"MaxUnpool", "no row yet"},
      {"Scatter", "no row yet"},
      {"ScatterElements", "no row yet"},
      {"ScatterND", "no row yet"},
      {"TensorScatter", "no row yet"},
      {"NegativeLogLikelihoodLoss", "no row yet"},
      {"SoftmaxCrossEntropyLoss", "no row yet"},
      {"RotaryEmbedding", "no row yet"},
      {"SwiGLU", "no row yet"},
      {"BitCast", "no row yet"},
  };
  return ops;
}

// Checks every run-time node of `g`: the table is never finer than the lowering's tags (that would
// fuse what must not be fused), and where it is coarser the op is listed above. Records the op
// types checked in `checked` and the coarser ones in `coarser`.
void expect_table_matches_tags(const Graph& g, const std::string& where, std::set<std::string>* checked = nullptr,
                               std::set<std::string>* coarser = nullptr) {
  for (size_t gi = 0; gi < g.nodes.size(); ++gi) {
    const Node& n = g.nodes[gi];
    if (!is_runtime_node(g, n)) continue;
    Subgraph one;
    one.nodes = {static_cast<int>(gi)};
    for (const auto& in : n.inputs)
      if (!in.empty()) one.inputs.push_back(in);
    for (const auto& o : n.outputs)
      if (!o.empty()) one.outputs.push_back(o);
    OpPattern tags;
    try {
      tags = pattern_from_stage_tags(lower_subgraph(g, one).dag);
    } catch (const Unsupported&) {
      continue;  // a case the lowering refuses by name (conformance counts these); nothing to compare
    }
    const OpPattern table = node_op_pattern(n);
    const std::string op = op_name(n.domain, n.op_type);
    if (checked) checked->insert(op);
    if (table_agrees(table, tags)) continue;
    const std::string says = where + ": " + n.label() + ": table says " + op_pattern_name(table) +
                             ", stage tags say " + op_pattern_name(tags);
    EXPECT_GT(static_cast<int>(table), static_cast<int>(tags)) << says << " (the table is finer than the lowering)";
    EXPECT_TRUE(coarser_than_lowering().count(op)) << says << " (coarser, and not listed as known)";
    if (coarser) coarser->insert(op);
  }
}

TEST(OpConsistency, PatternTableAgreesWithStageTagsOnTheZoo) {
  ZooOptions small;
  small.size = 32;
  for (const char* name : {"resnet18", "mobilenet_v2", "dcgan", "tiny_cnn"})
    expect_table_matches_tags(testing::load_zoo(name, small), name);
  expect_table_matches_tags(testing::load_built(testing::tiny_transformer_model()), "tiny_transformer");
  expect_table_matches_tags(testing::load_built(testing::attention_model()), "attention");
}

// An ONNX node test bound to its first data set (as `kiln conformance` binds it); nullopt when kiln
// cannot import or bind it (an unsupported op, an optional input): not this test's subject.
std::optional<Graph> load_node_test(const fs::path& dir) {
  try {
    return bind_test_data(import_onnx_file((dir / "model.onnx").string()), dir / "test_data_set_0").graph;
  } catch (const Error&) {
    return std::nullopt;
  }
}

TEST(OpConsistency, PatternTableAgreesWithStageTagsOnEveryOnnxNodeTest) {
  const fs::path root = fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "onnx-node";
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " is missing (the shared ONNX node tests)";
  std::set<std::string> checked, coarser;
  int models = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!fs::exists(e.path() / "model.onnx")) continue;
    std::optional<Graph> g = load_node_test(e.path());
    if (!g) continue;
    ++models;
    expect_table_matches_tags(*g, e.path().filename().string(), &checked, &coarser);
  }
  EXPECT_GT(models, 1000);
  // Every op in the table is checked by some node test, so no row goes unchecked; the exceptions:
  const std::map<std::string, const char*> not_checkable = {
      {"Not", "its node tests use opset 1, which kiln does not import"},
      {"ConstantOfShape", "its node tests' inputs are shapes: folded at compile time, never run"},
      {"Range", "its node tests' inputs are scalars: folded at compile time, never run"},
      {"GlobalLpPool", "ONNX has no node test for it"},
  };
  for (const auto& [op, pattern] : op_pattern_table_rows())
    EXPECT_NE(checked.count(op) != 0, not_checkable.count(op) != 0)
        << op << (checked.count(op) ? " is checked now: drop it from not_checkable" : " is checked by no node test");
  // A listed op that now agrees should leave the list.
  for (const auto& [op, why] : coarser_than_lowering())
    EXPECT_TRUE(coarser.count(op)) << op << " agrees with its lowering now (or has no node test): drop it from the list";
}

}  // namespace
}  // namespace kiln
