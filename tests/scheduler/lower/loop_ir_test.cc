// Loop IR of runtime-kernel calls: how an extern call prints, and that lower_dag turns the extern
// stages of one node (TopK's values and indices) into a single call writing both buffers; the
// default schedule's epilogue fusion and its prefetches.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/ir/error.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/loop_ir.h"
#include "scheduler/te/lower_graph.h"
#include "tests/frontend/partition/partition_models.h"
#include "tests/scheduler/lower/lowered_error.h"
#include "tests/scheduler/lower/reshape_dag.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using lower::make_buffer;

TEST(LoopIr, PrintsExternCallWithNullForAbsentBuffers) {
  lower::BufferRef x = make_buffer("x", DType::Float32, 12);
  lower::BufferRef values = make_buffer("values", DType::Float32, 6);
  lower::Stmt call = lower::extern_call("kiln_rt_topk", {x, values, nullptr}, {1, 4, 3});
  EXPECT_EQ(lower::print_stmt(call, 1), "  call kiln_rt_topk(x, values, null; 1, 4, 3)\n");
  EXPECT_EQ(lower::print_stmt(lower::block({call, call})),
            "call kiln_rt_topk(x, values, null; 1, 4, 3)\ncall kiln_rt_topk(x, values, null; 1, 4, 3)\n");
}

TEST(LoopIr, PrintsPrefetch) {
  lower::BufferRef x = make_buffer("x", DType::Float32, 12);
  EXPECT_EQ(lower::print_stmt(lower::prefetch(x, te::int_imm(16)), 1), "  prefetch x[16]\n");
}

Node topk_node() {
  Node n;
  n.name = "topk";
  n.op_type = "TopK";
  n.opset = 11;
  n.inputs = {"x", "k"};
  n.outputs = {"v", "i"};
  return n;  // axis -1, largest: the defaults
}

// x[2, 5] -> values/indices [2, 3] along the last axis.
struct TopKDag {
  te::TensorRef x = te::placeholder("x", DType::Float32, {2, 5});
  te::TensorRef values = te::extern_stage("values", topk_node(), {x}, 0, DType::Float32, {2, 3});
  te::TensorRef indices = te::extern_stage("indices", topk_node(), {x}, 1, DType::Int64, {2, 3});
};

TEST(LowerDag, TopKValuesAndIndicesAreOneCall) {
  TopKDag t;
  // A stage between the two outputs: the call still happens once, at the first.
  te::TensorRef twice = te::compute("twice", "elementwise", DType::Float32, {2, 3},
                                    [&](const std::vector<te::Expr>& idx) { return te::at(t.values, idx) * te::at(t.values, idx); });
  te::ComputeDAG dag = te::make_dag({twice, t.indices});
  ASSERT_EQ(dag.tensors.size(), 3u);
  EXPECT_EQ(lower::writer_stages(dag), (std::vector<size_t>{0, 1, 0}));
  lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  std::string text = lower::print_func(f);
  EXPECT_NE(text.find("  call kiln_rt_topk(x, values, indices, values.scratch; 1, 2, 5, 1, 3, 1)\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("call", text.find("call") + 1), std::string::npos) << "one call only:\n" << text;
  ASSERT_EQ(f.scratch.size(), 1u);
  EXPECT_EQ(f.scratch[0].stage, 0u);
  EXPECT_EQ(f.scratch[0].buffer->size, 3 * 8);  // k positions
  EXPECT_EQ(f.params.back(), f.scratch[0].buffer);
}

TEST(LowerDag, UnusedTopKOutputIsANullArgument) {
  TopKDag t;
  lower::LoweredFunc f = lower::lower_dag(te::make_dag({t.indices}), "k", {});
  EXPECT_NE(lower::print_func(f).find("call kiln_rt_topk(x, null, indices, indices.scratch; "), std::string::npos)
      << lower::print_func(f);
}

TEST(LowerDag, OpWithoutRuntimeKernelIsUnsupported) {
  Node n;
  n.name = "nz";
  n.op_type = "NonZero";
  n.outputs = {"y"};
  te::TensorRef x = te::placeholder("x", DType::Float32, {4});
  te::TensorRef y = te::extern_stage("y", n, {x}, 0, DType::Int64, {1, 2});
  EXPECT_THROW(lower::lower_dag(te::make_dag({y}), "k", {}), Unsupported);
}

// Conv -> bias -> Relu: the bias stage and the Relu are the reduction's epilogue, stored from its
// accumulators by the reduction's own loop nest; neither gets a loop nest or a pass of its own.
TEST(LowerDag, BiasAndActivationAreTheConvolutionsEpilogue) {
  ModelBuilder b = testing::conv_bias_relu_model();
  const Graph g = testing::prepared_graph(b);
  const te::ComputeDAG dag = te::lower_graph(g).dag;
  const lower::EpiloguePlan plan = lower::plan_epilogues(dag);
  ASSERT_EQ(plan.by_stage.size(), 1u) << te::print_dag(dag);
  const lower::Epilogue& e = plan.by_stage.begin()->second;
  EXPECT_EQ(e.out->name, "relu");
  EXPECT_EQ(plan.chain_members.size(), 2u);    // the bias stage and the Relu
  EXPECT_EQ(plan.computed_inside.size(), 2u);  // the accumulator and the bias stage: never stored
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  EXPECT_EQ(f.body->body.size(), dag.tensors.size() - plan.chain_members.size()) << lower::print_func(f);
  const std::string text = lower::print_func(f);
  EXPECT_EQ(text.find("conv["), std::string::npos) << text;  // the bias stage's buffer is never written
  EXPECT_NE(text.find("relu["), std::string::npos) << text;
}

// An NCHW 1x1 conv on 6 x 5 maps, with a per-channel epilogue: the rows (5) are shorter than a
// vector, but the input, the output and the epilogue walk h and w as one run, so the nest computes
// rows of 30 (vectors of whole lanes). A 3x3 conv with padding reads rows apart (its selects) and
// keeps its 5-wide rows. Both compute what the evaluator computes.
TEST(LowerDag, ShortRowsThatEveryAccessWalksAsOneRunMerge) {
  using V = std::vector<te::Expr>;
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 8, 6, 5});
  te::TensorRef w = te::placeholder("w", DType::Float32, {4, 8});
  te::TensorRef b = te::placeholder("b", DType::Float32, {4});
  te::TensorRef pw = te::reduce("pw", "conv", DType::Float32, {1, 4, 6, 5}, te::Reducer::Sum, {8},
                                [&](const V& i, const V& r) { return te::at(x, {i[0], r[0], i[2], i[3]}) * te::at(w, {i[1], r[0]}); });
  te::TensorRef biased = te::compute("biased", "broadcast", DType::Float32, {1, 4, 6, 5},
                                     [&](const V& i) { return te::at(pw, i) + te::at(b, {i[1]}); });
  const te::ComputeDAG dag = te::make_dag({biased});
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  const std::string text = lower::print_func(f);
  EXPECT_NE(text.find(" * 30) + "), std::string::npos) << text;  // the output's rows are 30 long
  EXPECT_LT(testing::max_error(f, dag), 1e-5) << text;

  te::TensorRef w3 = te::placeholder("w3", DType::Float32, {4, 8, 3, 3});
  te::TensorRef conv = te::reduce("c3", "conv", DType::Float32, {1, 4, 6, 5}, te::Reducer::Sum, {8, 3, 3},
                                  [&](const V& i, const V& r) {
                                    te::Expr y = i[2] + r[1] - te::int_imm(1), xx = i[3] + r[2] - te::int_imm(1);
                                    te::Expr in = y >= te::int_imm(0) && y < te::int_imm(6) && xx >= te::int_imm(0) && xx < te::int_imm(5);
                                    return te::select(in, te::at(x, {i[0], r[0], y, xx}), te::const_of(DType::Float32, 0)) *
                                           te::at(w3, {i[1], r[0], r[1], r[2]});
                                  });
  const te::ComputeDAG dag3 = te::make_dag({conv});
  const lower::LoweredFunc f3 = lower::lower_dag(dag3, "k", {});
  const std::string text3 = lower::print_func(f3);
  EXPECT_EQ(text3.find(" * 30) + "), std::string::npos) << text3;
  EXPECT_LT(testing::max_error(f3, dag3), 1e-5) << text3;
}

// On a core without vectors (a Cortex-M: 32-bit vectors, one int32 lane) an int32 reduction keeps a
// scalar tile of four accumulators: an int8 pointwise conv's 25 x 5 maps merge into rows of 125
// (odd rows would leave a column untiled) taken two pixels by two output channels; a matmul, with no
// channel axis, two rows by two columns. Both compute what the evaluator computes; float32 keeps its
// accumulator row.
TEST(LowerDag, ACoreWithoutVectorsTilesInt32ReductionsInFourScalarAccumulators) {
  using V = std::vector<te::Expr>;
  const lower::ScheduleParams m4 = lower::schedule_params_for(32);
  auto pointwise = [&](DType t) {
    te::TensorRef x = te::placeholder("x", t, {1, 8, 25, 5});
    te::TensorRef w = te::placeholder("w", t, {6, 8});
    return te::make_dag({te::reduce("pw", "conv", t, {1, 6, 25, 5}, te::Reducer::Sum, {8}, [&](const V& i, const V& r) {
      return te::at(x, {i[0], r[0], i[2], i[3]}) * te::at(w, {i[1], r[0]});
    })});
  };
  const te::ComputeDAG conv = pointwise(DType::Int32);
  lower::LoweredFunc f = lower::lower_dag(conv, "k", m4);
  std::string text = lower::print_func(f);
  EXPECT_NE(text.find("pw.tile: int32[4]"), std::string::npos) << text;
  EXPECT_NE(text.find("unrolled for i1.m in 0..2"), std::string::npos) << text;
  EXPECT_NE(text.find(" * 125) + "), std::string::npos) << text;
  EXPECT_EQ(testing::max_error(f, conv), 0) << text;

  te::TensorRef a = te::placeholder("a", DType::Int32, {7, 12});
  te::TensorRef b = te::placeholder("b", DType::Int32, {12, 9});
  const te::ComputeDAG mm = te::make_dag({te::reduce("mm", "matmul", DType::Int32, {7, 9}, te::Reducer::Sum, {12},
                                                     [&](const V& i, const V& r) { return te::at(a, {i[0], r[0]}) * te::at(b, {r[0], i[1]}); })});
  f = lower::lower_dag(mm, "k", m4);
  text = lower::print_func(f);
  EXPECT_NE(text.find("mm.tile: int32[4]"), std::string::npos) << text;
  EXPECT_NE(text.find("unrolled for i0.i in 0..2"), std::string::npos) << text;
  EXPECT_EQ(testing::max_error(f, mm), 0) << text;

  EXPECT_EQ(lower::print_func(lower::lower_dag(pointwise(DType::Float32), "k", m4)).find(".tile"), std::string::npos);
}

// A reduction whose innermost output axes have one iteration (a global average pool in NCHW) keeps
// its accumulators along the channels, a vector, instead of one scalar accumulator whose every add
// waits for the last; each channel sums in the same order.
TEST(LowerDag, AReductionToUnitInnerAxesAccumulatesAlongTheLastAxisWithMore) {
  using V = std::vector<te::Expr>;
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 20, 7, 9});
  te::TensorRef pool = te::reduce("pool", "reduction", DType::Float32, {1, 20, 1, 1}, te::Reducer::Sum, {7, 9},
                                  [&](const V& i, const V& r) { return te::at(x, {i[0], i[1], r[0], r[1]}); });
  const te::ComputeDAG dag = te::make_dag({pool});
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  const std::string text = lower::print_func(f);
  EXPECT_NE(text.find("vectorized for i1 in 0..20"), std::string::npos) << text;
  EXPECT_LT(testing::max_error(f, dag), 1e-5) << text;
}

// A reduction to one element: a min, a max or an integer sum combines a vector of partial results
// (order-free, so the same value); a float sum keeps its one accumulator and its order. The
// innermost reduction axis, 37, leaves a tail past its whole vectors.
TEST(LowerDag, AnOrderFreeReductionToOneElementKeepsAVectorOfPartialResults) {
  using V = std::vector<te::Expr>;
  te::TensorRef x = te::placeholder("x", DType::Float32, {3, 37});
  te::TensorRef n = te::placeholder("n", DType::Int32, {3, 37});
  auto whole = [&](const std::string& name, const te::TensorRef& in, te::Reducer r, const Shape& out) {
    return te::reduce(name, "reduction", in->dtype, out, r, {3, 37}, [&](const V&, const V& k) { return te::at(in, {k[0], k[1]}); });
  };
  for (const te::TensorRef& t : {whole("hi", x, te::Reducer::Max, {}), whole("lo", x, te::Reducer::Min, {1, 1}),
                                 whole("total", x, te::Reducer::Sum, {})}) {
    const te::ComputeDAG dag = te::make_dag({t});
    const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
    const std::string text = lower::print_func(f);
    EXPECT_EQ(text.find(".parts") != std::string::npos, t->name != "total") << text;
    EXPECT_LT(testing::max_error(f, dag), t->name == "total" ? 1e-5 : 1e-30) << text;  // min and max exact
  }
  // The integer sum, run on integers (max_error fills floats): exact, wrapping as int32 does.
  const te::ComputeDAG dag = te::make_dag({whole("count", n, te::Reducer::Sum, {})});
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  ASSERT_NE(lower::print_func(f).find(".parts"), std::string::npos) << lower::print_func(f);
  std::vector<int32_t> values(111), result(1, 0);
  uint32_t want = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<int32_t>(i * 2654435761u);  // large values, so the sum wraps
    want += static_cast<uint32_t>(values[i]);
  }
  llvm_backend::JitFunction jit(f);
  jit.run({values.data(), result.data()});
  EXPECT_EQ(result[0], static_cast<int32_t>(want));
}

// SiLU after a matmul, y = mm * sigmoid(mm): the sigmoid inlines into the Mul, so the Mul finishes
// the matmul as a bias would (before, the matmul had two readers and both ran as passes of their own).
TEST(LowerDag, SilusSigmoidFoldsIntoTheMatmulsEpilogue) {
  using V = std::vector<te::Expr>;
  te::TensorRef a = te::placeholder("a", DType::Float32, {6, 8}), w = te::placeholder("w", DType::Float32, {8, 5});
  te::TensorRef mm = te::reduce("mm", "matmul", DType::Float32, {6, 5}, te::Reducer::Sum, {8},
                                [&](const V& i, const V& r) { return te::at(a, {i[0], r[0]}) * te::at(w, {r[0], i[1]}); });
  te::TensorRef sig = te::compute("sig", "elementwise", DType::Float32, {6, 5},
                                  [&](const V& i) { return te::unary(te::ExprOp::Sigmoid, te::at(mm, i)); });
  te::TensorRef silu = te::compute("silu", "elementwise", DType::Float32, {6, 5},
                                   [&](const V& i) { return te::at(mm, i) * te::at(sig, i); });
  const te::ComputeDAG dag = te::make_dag({silu});
  const lower::EpiloguePlan plan = lower::plan_epilogues(dag);
  ASSERT_EQ(plan.by_stage.size(), 1u) << te::print_dag(dag);
  EXPECT_EQ(plan.by_stage.begin()->second.out->name, "silu");
  EXPECT_TRUE(plan.chain_members.count(sig.get()));
  EXPECT_TRUE(plan.computed_inside.count(sig.get()));
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  const std::string text = lower::print_func(f);
  EXPECT_EQ(f.body->body.size(), 1u) << text;
  EXPECT_EQ(text.find("sig["), std::string::npos) << text;
  EXPECT_EQ(text.find("mm["), std::string::npos) << text;
  EXPECT_LT(testing::max_error(f, dag), 1e-5) << text;
}

// A blocked 1x1 conv with 16-wide blocks, out[ob, h, w, o] = sum_{ib, i} in[ib, h, w, i] * wt[ob, ib, i, o].
te::TensorRef blocked_1x1_conv(int64_t in_blocks, int64_t out_blocks, int64_t h, int64_t w) {
  te::TensorRef in = te::placeholder("in", DType::Float32, {in_blocks, h, w, 16});
  te::TensorRef wt = te::placeholder("wt", DType::Float32, {out_blocks, in_blocks, 16, 16});
  return te::reduce("out", "conv", DType::Float32, {out_blocks, h, w, 16}, te::Reducer::Sum, {in_blocks, 16},
                    [&](const std::vector<te::Expr>& o, const std::vector<te::Expr>& r) {
                      return te::at(in, {r[0], o[1], o[2], r[1]}) * te::at(wt, {o[0], r[0], r[1], o[3]});
                    });
}

// A blocked 1x1 conv with 9 output-channel blocks (144 channels; squeezenet's 1000 classes are 63): 4
// and 2 do not divide them, so the register tile takes 3 blocks, each input value broadcast once for
// three FMAs instead of one.
TEST(LowerDag, ABlockCountOfThreesGetsThreeBlockRegisterTiles) {
  const te::ComputeDAG dag = te::make_dag({blocked_1x1_conv(2, 9, 13, 13)});
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  const std::string text = lower::print_func(f);
  EXPECT_NE(text.find("i0.m in 0..3"), std::string::npos) << text;
  EXPECT_LT(testing::max_error(f, dag), 1e-3) << text;
}

// Two blocks when one is all that fits half the L2 and two fit 3/4 of it (ResNet's 7x7 convs: 295 KB
// of weights per block); none when two would not. Here a 40 KB L2 and 12 KB or 16 KB per block.
TEST(LowerDag, TwoOperandBlocksWhenOneIsAllThatFitsHalfTheL2) {
  lower::ScheduleParams p;
  p.l2_bytes = 40 << 10;
  const te::ComputeDAG two = te::make_dag({blocked_1x1_conv(12, 4, 3, 7)});
  const lower::LoweredFunc f = lower::lower_dag(two, "k", p);
  EXPECT_NE(lower::print_func(f).find("i0.m in 0..2"), std::string::npos) << lower::print_func(f);
  EXPECT_LT(testing::max_error(f, two), 1e-3);
  const std::string one = lower::print_func(lower::lower_dag(te::make_dag({blocked_1x1_conv(16, 4, 3, 7)}), "k", p));
  EXPECT_EQ(one.find("i0.m in"), std::string::npos) << one;
}

// Occurrences of `what` in `text`.
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A blocked 1x1 conv: each step of the input-channel block loop first asks for the input lines of the
// next tile of output pixels (one per pixel row of the tile), never for the weights (read along the
// vector).
TEST(LowerDag, BlockedConvPrefetchesTheNextTilesInput) {
  const std::string text =
      lower::print_func(lower::lower_dag(te::make_dag({blocked_1x1_conv(2, 4, 3, 12)}), "k", {}));
  EXPECT_EQ(count(text, "prefetch wt["), 0u) << text;
  // Tiles of 6 pixel rows (12 = 2 x 6): one prefetch per row, inside the block loop, before `for r1`.
  EXPECT_EQ(count(text, "prefetch in["), 6u) << text;
  const size_t first = text.find("prefetch in[");
  EXPECT_LT(text.find("for r0"), first) << text;
  EXPECT_GT(text.find("for r1"), first) << text;
  EXPECT_NE(text.find("+ 6)"), std::string::npos) << "the next tile starts 6 pixels on:\n" << text;
}

// A matmul's reduction walks whole rows, far more than a cache line per step: no prefetch.
TEST(LowerDag, MatmulHasNoPrefetch) {
  te::TensorRef a = te::placeholder("a", DType::Float32, {12, 64});
  te::TensorRef b = te::placeholder("b", DType::Float32, {64, 32});
  te::TensorRef c = te::reduce("c", "matmul", DType::Float32, {12, 32}, te::Reducer::Sum, {64},
                               [&](const std::vector<te::Expr>& o, const std::vector<te::Expr>& r) {
                                 return te::at(a, {o[0], r[0]}) * te::at(b, {r[0], o[1]});
                               });
  const std::string text = lower::print_func(lower::lower_dag(te::make_dag({c}), "k", {}));
  EXPECT_NE(text.find("c.tile"), std::string::npos) << text;  // register-tiled, like the conv
  EXPECT_EQ(count(text, "prefetch"), 0u) << text;
}

// Which of a matmul's tile loops goes outside: the column panels (each K x J panel of b then stays in
// cache while the row tiles pass, and the threads split the panels) when b is the bigger operand, the
// row tiles when a is; the rows and columns past the last whole tile are computed either way.
TEST(LowerDag, MatmulPutsThePanelsOfTheBiggerOperandOutside) {
  auto matmul_text = [](int64_t m, int64_t k, int64_t n) {
    te::TensorRef a = te::placeholder("a", DType::Float32, {m, k});
    te::TensorRef b = te::placeholder("b", DType::Float32, {k, n});
    te::TensorRef c = te::reduce("c", "matmul", DType::Float32, {m, n}, te::Reducer::Sum, {k},
                                 [&](const std::vector<te::Expr>& o, const std::vector<te::Expr>& r) {
                                   return te::at(a, {o[0], r[0]}) * te::at(b, {r[0], o[1]});
                                 });
    return lower::print_func(lower::lower_dag(te::make_dag({c}), "k", {}));
  };
  // b 64 x 200 (51 KB) against a 53 x 64 (14 KB): 6 panels of 32 columns (8 left), 4 tiles of 11 rows (9 left).
  const std::string wide = matmul_text(53, 64, 200);
  ASSERT_NE(wide.find("parallel for i1.o in 0..6"), std::string::npos) << wide;
  EXPECT_LT(wide.find("parallel for i1.o"), wide.find("for i0.o in 0..4")) << wide;
  EXPECT_NE(wide.find("(44 + i0.i)"), std::string::npos) << "the 9 rows left, inside each panel:\n" << wide;
  EXPECT_NE(wide.find("for i1.r in 0..8"), std::string::npos) << "the 8 columns left:\n" << wide;
  // a 1024 x 64 against b 64 x 64: the row tiles stay outside and parallel.
  const std::string tall = matmul_text(1024, 64, 64);
  EXPECT_NE(tall.find("parallel for i0.o"), std::string::npos) << tall;
  EXPECT_EQ(tall.find("parallel for i1.o"), std::string::npos) << tall;
  // A matrix-vector product (1 x 1280 x 1000, a classifier) has no row to split: the threads split
  // its 31 column panels (the 8 columns left run after them).
  const std::string gemv = matmul_text(1, 1280, 1000);
  EXPECT_NE(gemv.find("parallel for i1.o in 0..31"), std::string::npos) << gemv;
  // One too small for a parallel loop stays serial.
  const std::string small = matmul_text(1, 16, 64);
  EXPECT_EQ(small.find("parallel"), std::string::npos) << small;
}

// A transpose (each vector of the innermost output axis would be a gather) runs in 16 x 16 tiles
// through a local buffer: contiguous loads along the other axis, contiguous stores along the
// innermost; the rows and columns past the last whole tile keep plain loops. A channel index split as
// a blocked layout's (c / 16, c % 16) counts as contiguous within a tile. A select (padding) keeps the
// plain loop.
TEST(LowerDag, TransposesRunInTilesThroughALocalBuffer) {
  auto lowered = [](const te::TensorRef& t) { return lower::print_func(lower::lower_dag(te::make_dag({t}), "k", {})); };
  te::TensorRef x = te::placeholder("x", DType::Float32, {40, 56});
  te::TensorRef t = te::compute("t", "injective", DType::Float32, {56, 40},
                                [&](const std::vector<te::Expr>& i) { return te::at(x, {i[1], i[0]}); });
  const std::string plain = lowered(t);
  EXPECT_NE(plain.find("allocate t.tile: float32[256]"), std::string::npos) << plain;
  EXPECT_NE(plain.find("for i0.o in 0..3"), std::string::npos) << "48 of 56 rows in tiles:\n" << plain;
  EXPECT_NE(plain.find("for i0.r in 0..8"), std::string::npos) << "the 8 rows left:\n" << plain;
  EXPECT_NE(plain.find("for i1.r in 0..8"), std::string::npos) << "the 8 columns left:\n" << plain;
  // NCHW16c -> NCHW: out[c, w] = x[c / 16, w, c % 16].
  te::TensorRef b = te::placeholder("b", DType::Float32, {2, 48, 16});
  te::TensorRef nchw = te::compute("nchw", "injective", DType::Float32, {32, 48}, [&](const std::vector<te::Expr>& i) {
    return te::at(b, {te::floordiv(i[0], te::int_imm(16)), i[1], te::floormod(i[0], te::int_imm(16))});
  });
  const std::string blocked = lowered(nchw);
  EXPECT_NE(blocked.find("allocate nchw.tile"), std::string::npos) << blocked;
  EXPECT_EQ(blocked.find("floordiv"), std::string::npos) << "the split axis names the block directly:\n" << blocked;
  te::TensorRef padded = te::compute("padded", "injective", DType::Float32, {56, 40}, [&](const std::vector<te::Expr>& i) {
    return te::select(i[1] < te::int_imm(30), te::at(x, {i[1], i[0]}), te::const_of(DType::Float32, 0));
  });
  const std::string with_select = lowered(padded);
  EXPECT_EQ(with_select.find(".tile"), std::string::npos) << with_select;
}

// A reshape unravels its output position over the input's axes; flattening the load folds the
// floordiv / floormod chain back into the position, so the copy is contiguous (no gather). yolox_nano's
// [1, 85, 52, 52] -> [1, 85, 2704] took 7% of the model before (bench/RESULTS.md, issue 17 step 11).
TEST(LowerDag, AReshapeReadsItsInputAtItsOwnFlatPosition) {
  te::TensorRef r = testing::unravelled_reshape();
  const std::string lowered = lower::print_func(lower::lower_dag(te::make_dag({r}), "k", {}));
  EXPECT_NE(lowered.find("r[((i0 * 12) + i1)] = x[((i0 * 12) + i1)]"), std::string::npos) << lowered;
  // Divisors that do not nest (a 5 x 4 tensor read as an unravelling over 4 x 5) stay as they are.
  te::TensorRef x2 = te::placeholder("x2", DType::Float32, {5, 4});
  te::TensorRef q = te::compute("q", "injective", DType::Float32, {20}, [&](const std::vector<te::Expr>& i) {
    return te::at(x2, {te::floordiv(i[0], te::int_imm(5)), te::floormod(i[0], te::int_imm(4))});
  });
  const std::string kept = lower::print_func(lower::lower_dag(te::make_dag({q}), "k", {}));
  EXPECT_NE(kept.find("floormod"), std::string::npos) << kept;
}

// An elementwise stage whose innermost axis has one iteration (blocks of 1) vectorizes the last axis
// with more, and the threads split an outer axis of 4 or more iterations, not the 3 channels.
TEST(LowerDag, TrailingUnitAxesLeaveTheVectorToTheRow) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 3, 256, 320, 1});
  te::TensorRef y = te::compute("y", "injective", DType::Float32, {1, 3, 256, 320, 1},
                                [&](const std::vector<te::Expr>& i) { return te::at(x, i) * te::const_of(DType::Float32, 2); });
  const std::string lowered = lower::print_func(lower::lower_dag(te::make_dag({y}), "k", {}));
  EXPECT_NE(lowered.find("vectorized for i3 in 0..320"), std::string::npos) << lowered;
  EXPECT_NE(lowered.find("parallel for i2 in 0..256"), std::string::npos) << lowered;
  EXPECT_EQ(lowered.find("for i4"), std::string::npos) << lowered;
}

// A Concat's select chain on an axis becomes one loop nest per input, each a plain copy (on the
// vectorized axis too); a select on anything but an axis below a constant stays a select.
TEST(LowerDag, AConcatIsOneCopyPerInput) {
  te::TensorRef a = te::placeholder("a", DType::Float32, {3, 40}), b = te::placeholder("b", DType::Float32, {2, 40}),
                c = te::placeholder("c", DType::Float32, {4, 40});
  auto i64 = [](int64_t v) { return te::int_imm(v); };
  te::TensorRef y = te::compute("y", "injective", DType::Float32, {9, 40}, [&](const std::vector<te::Expr>& i) {
    return te::select(i[0] < i64(3), te::at(a, {i[0], i[1]}),
                      te::select(i[0] < i64(5), te::at(b, {i[0] - i64(3), i[1]}), te::at(c, {i[0] - i64(5), i[1]})));
  });
  const std::string lowered = lower::print_func(lower::lower_dag(te::make_dag({y}), "k", {}));
  EXPECT_EQ(lowered.find("select"), std::string::npos) << lowered;
  EXPECT_NE(lowered.find("for i0 in 0..3"), std::string::npos) << lowered;
  EXPECT_NE(lowered.find("for i0 in 0..2"), std::string::npos) << lowered;
  EXPECT_NE(lowered.find("for i0 in 0..4"), std::string::npos) << lowered;
  // On the vectorized axis: one vectorized loop per range.
  te::TensorRef z = te::compute("z", "injective", DType::Float32, {3, 40}, [&](const std::vector<te::Expr>& i) {
    return te::select(i[1] < i64(20), te::at(a, {i[0], i[1]}), te::const_of(DType::Float32, 0));
  });
  const std::string inner = lower::print_func(lower::lower_dag(te::make_dag({z}), "k", {}));
  EXPECT_EQ(inner.find("select"), std::string::npos) << inner;
  EXPECT_NE(inner.find("vectorized for i1 in 0..20"), inner.rfind("vectorized for i1 in 0..20")) << inner;
  // A condition that is no axis below a constant stays a select.
  te::TensorRef w = te::compute("w", "injective", DType::Float32, {3, 40}, [&](const std::vector<te::Expr>& i) {
    return te::select(i[0] + i[1] < i64(20), te::at(a, {i[0], i[1]}), te::const_of(DType::Float32, 0));
  });
  const std::string kept = lower::print_func(lower::lower_dag(te::make_dag({w}), "k", {}));
  EXPECT_NE(kept.find("select"), std::string::npos) << kept;
}

// A stage combining two reductions (max - min, as DynamicQuantizeLinear's scale) can only be the
// epilogue of the later one: in the earlier one's loop nest the other is not computed yet.
TEST(LowerDag, AStageOfTwoReductionsIsTheEpilogueOfTheLaterOne) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {8});
  auto whole = [&](const char* name, te::Reducer r) {
    return te::reduce(name, "reduction", DType::Float32, {}, r, {8},
                      [&](const std::vector<te::Expr>&, const std::vector<te::Expr>& k) { return te::at(x, {k[0]}); });
  };
  te::TensorRef lo = whole("lo", te::Reducer::Min), hi = whole("hi", te::Reducer::Max);
  te::TensorRef range = te::compute("range", "elementwise", DType::Float32, {},
                                    [&](const std::vector<te::Expr>&) { return te::at(hi, {}) - te::at(lo, {}); });
  const te::ComputeDAG dag = te::make_dag({range});
  const lower::EpiloguePlan plan = lower::plan_epilogues(dag);
  ASSERT_EQ(plan.by_stage.size(), 1u) << te::print_dag(dag);
  const te::TensorRef& host = dag.tensors[plan.by_stage.begin()->first];
  const size_t lo_at = static_cast<size_t>(std::find(dag.tensors.begin(), dag.tensors.end(), lo) - dag.tensors.begin());
  const size_t hi_at = static_cast<size_t>(std::find(dag.tensors.begin(), dag.tensors.end(), hi) - dag.tensors.begin());
  EXPECT_EQ(host, lo_at > hi_at ? lo : hi);
  EXPECT_FALSE(plan.computed_inside.count(lo_at > hi_at ? hi.get() : lo.get()));  // the earlier one is stored
}

}  // namespace
}  // namespace kiln
