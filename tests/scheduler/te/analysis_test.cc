// Stage analysis of compute DAGs: which stages read simply, may be inlined (strictly or not), need
// multi-level tiling, who reads whom with and without inlined stages, how many outer loops a
// producer shares with a reader, and which paths are elementwise; on hand-built DAGs (matmul, conv
// with a padding stage, softmax, layer norm, layout changes, broadcasts) and on real op lowerings.
#include <gtest/gtest.h>

#include <set>

#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "scheduler/tasks/task.h"
#include "scheduler/te/analysis.h"
#include "tests/frontend/partition/partition_models.h"

namespace kiln::te {
namespace {

using V = std::vector<Expr>;

const DType f32 = DType::Float32;
Expr zero() { return float_imm(0.0f); }

std::vector<std::string> names(const std::vector<TensorRef>& ts) {
  std::vector<std::string> out;
  for (const TensorRef& t : ts) out.push_back(t->name);
  return out;
}
using Names = std::vector<std::string>;

InlinedFn inlined(std::set<const TensorNode*> stages) {
  return [stages](const TensorNode* t) { return stages.count(t) != 0; };
}

TensorRef matmul(const std::string& name, const TensorRef& a, const TensorRef& b) {
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  return reduce(name, "matmul", f32, {m, n}, Reducer::Sum, {k},
                [&](const V& i, const V& r) { return at(a, {i[0], r[0]}) * at(b, {r[0], i[1]}); });
}

TensorRef relu(const std::string& name, const TensorRef& x) {
  return compute(name, "elementwise", f32, x->shape, [&](const V& i) { return max(at(x, i), zero()); });
}

TEST(Analysis, MatmulNeedsTilingAndIsNeitherSimpleNorInlineable) {
  TensorRef a = placeholder("A", f32, {4, 8}), b = placeholder("B", f32, {8, 16});
  TensorRef mm = matmul("mm", a, b);
  DagAnalysis an(make_dag({mm}));
  EXPECT_TRUE(an.needs_multi_level_tiling(mm.get()));
  EXPECT_FALSE(an.is_simple_access(mm.get()));  // the reduce axis indexes both operands
  EXPECT_FALSE(an.is_inlineable(mm.get()));
  EXPECT_FALSE(an.is_strictly_inlineable(mm.get()));
  EXPECT_TRUE(an.is_output(mm.get()));
  EXPECT_EQ(an.flops(mm.get()), 4 * 16 * 8 * 2);
  EXPECT_EQ(names(an.direct_producers(mm.get())), (Names{"A", "B"}));
  EXPECT_EQ(names(an.direct_consumers(a.get())), (Names{"mm"}));
  EXPECT_EQ(an.flops(a.get()), 0);
  EXPECT_FALSE(an.needs_multi_level_tiling(a.get()));  // a placeholder has no stage to tile
  EXPECT_EQ(an.num_common_outer_iterators(a.get(), mm.get()), 1);  // A[i0, r0]: i0 of equal extent 4
  EXPECT_EQ(an.num_common_outer_iterators(b.get(), mm.get()), 0);  // B[r0, i1]
}

TEST(Analysis, MatmulReluFusesElementwiseAndPrints) {
  TensorRef a = placeholder("A", f32, {4, 8}), b = placeholder("B", f32, {8, 16});
  TensorRef mm = matmul("mm", a, b);
  TensorRef r = relu("relu", mm);
  ComputeDAG dag = make_dag({r});
  DagAnalysis an(dag);
  EXPECT_TRUE(an.is_simple_access(r.get()));
  EXPECT_TRUE(an.is_strictly_inlineable(r.get()));
  EXPECT_FALSE(an.should_always_inline(r.get()));  // the output must be stored
  EXPECT_FALSE(an.needs_multi_level_tiling(r.get()));
  EXPECT_FALSE(an.is_output(mm.get()));
  EXPECT_TRUE(an.elementwise_match(mm.get(), r.get()));
  EXPECT_TRUE(an.elementwise_match(mm.get(), mm.get()));
  EXPECT_FALSE(an.elementwise_match(r.get(), mm.get()));  // no path that way
  EXPECT_EQ(an.num_common_outer_iterators(mm.get(), r.get()), 2);
  EXPECT_EQ(an.num_common_outer_iterators(r.get(), mm.get()), 0);
  EXPECT_EQ(names(an.direct_consumers(mm.get())), (Names{"relu"}));
  EXPECT_EQ(print_analysis(dag),
            "A: placeholder | producers - | consumers mm(outer 1) | flops 0\n"
            "B: placeholder | producers - | consumers mm(outer 0) | flops 0\n"
            "mm: multi-level-tiling | producers A, B | consumers relu(outer 2, ew) | flops 1024\n"
            "relu: output simple-access inlineable strictly-inlineable | producers mm | consumers - | flops 64\n");
}

// conv2d NCHW 3->4 channels, 3x3 kernel, padding 1 as its own stage, then bias and ReLU.
struct ConvDag {
  TensorRef x = placeholder("x", f32, {1, 3, 8, 8});
  TensorRef w = placeholder("w", f32, {4, 3, 3, 3});
  TensorRef b = placeholder("b", f32, {4});
  TensorRef pad, conv, bias, act;
  ComputeDAG dag;

  ConvDag() {
    pad = compute("pad", "injective", f32, {1, 3, 10, 10}, [&](const V& i) {
      Expr inside = i[2] >= int_imm(1) && i[2] < int_imm(9) && i[3] >= int_imm(1) && i[3] < int_imm(9);
      return select(inside, at(x, {i[0], i[1], i[2] - 1, i[3] - 1}), zero());
    });
    conv = reduce("conv", "conv", f32, {1, 4, 8, 8}, Reducer::Sum, {3, 3, 3}, [&](const V& i, const V& r) {
      return at(pad, {i[0], r[0], i[2] + r[1], i[3] + r[2]}) * at(w, {i[1], r[0], r[1], r[2]});
    });
    bias = compute("bias", "broadcast", f32, conv->shape, [&](const V& i) { return at(conv, i) + at(b, {i[1]}); });
    act = relu("relu", bias);
    dag = make_dag({act});
  }
};

TEST(Analysis, ConvWithPaddingStageBiasAndRelu) {
  ConvDag c;
  DagAnalysis an(c.dag);
  // Padding offsets its indices: inlineable, but not simple, so not inlined without a search.
  EXPECT_TRUE(an.is_inlineable(c.pad.get()));
  EXPECT_FALSE(an.is_simple_access(c.pad.get()));
  EXPECT_FALSE(an.is_strictly_inlineable(c.pad.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(c.pad.get()));
  EXPECT_TRUE(an.needs_multi_level_tiling(c.conv.get()));
  EXPECT_FALSE(an.is_inlineable(c.conv.get()));
  EXPECT_TRUE(an.is_strictly_inlineable(c.bias.get()));  // b[i1] is a broadcast, still simple
  EXPECT_TRUE(an.should_always_inline(c.bias.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(c.bias.get()));  // b misses output axes, but no reduction
  EXPECT_TRUE(an.is_strictly_inlineable(c.act.get()));
  EXPECT_TRUE(an.is_output(c.act.get()));
  // conv -> bias -> relu is elementwise all the way: tile conv with relu fused.
  EXPECT_TRUE(an.elementwise_match(c.conv.get(), c.act.get()));
  EXPECT_TRUE(an.elementwise_match(c.conv.get(), c.bias.get()));
  EXPECT_FALSE(an.elementwise_match(c.pad.get(), c.conv.get()));
  EXPECT_EQ(an.num_common_outer_iterators(c.conv.get(), c.act.get()), 4);
  EXPECT_EQ(an.num_common_outer_iterators(c.pad.get(), c.conv.get()), 1);  // batch only; r0 reads channels
  EXPECT_EQ(an.num_common_outer_iterators(c.pad.get(), c.act.get()), 1);
  EXPECT_EQ(an.num_common_outer_iterators(c.x.get(), c.pad.get()), 2);  // x[i0, i1, i2 - 1, ...]
  EXPECT_EQ(an.num_common_outer_iterators(c.b.get(), c.bias.get()), 0);
  EXPECT_EQ(an.flops(c.conv.get()), 4 * 8 * 8 * 27 * 2);
  EXPECT_EQ(an.flops(c.bias.get()), 4 * 8 * 8);

  auto none = [](const TensorNode*) { return false; };
  EXPECT_EQ(names(an.consumers(c.conv.get(), none)), (Names{"bias"}));
  EXPECT_EQ(names(an.consumers(c.conv.get(), inlined({c.bias.get()}))), (Names{"relu"}));
  EXPECT_EQ(names(an.producers(c.conv.get(), none)), (Names{"w", "pad"}));
  EXPECT_EQ(names(an.producers(c.conv.get(), inlined({c.pad.get()}))), (Names{"x", "w"}));
  EXPECT_EQ(names(an.producers(c.act.get(), inlined({c.bias.get()}))), (Names{"b", "conv"}));
  EXPECT_EQ(names(an.producers(c.act.get(), nullptr)), (Names{"bias"}));
  EXPECT_EQ(names(an.consumers(c.x.get(), inlined({c.pad.get()}))), (Names{"conv"}));
  EXPECT_EQ(names(an.direct_producers(c.x.get())), (Names{}));
}

// softmax over rows of x[4, 10], in the four stages the Softmax lowering uses.
TEST(Analysis, SoftmaxRowReductionsNeedNoTilingAndExpIsNotStrictlyInlineable) {
  TensorRef x = placeholder("x", f32, {4, 10});
  TensorRef mx = reduce("max", "reduction", f32, {4}, Reducer::Max, {10},
                        [&](const V& i, const V& r) { return at(x, {i[0], r[0]}); });
  TensorRef e = compute("exp", "broadcast", f32, {4, 10},
                        [&](const V& i) { return unary(ExprOp::Exp, at(x, i) - at(mx, {i[0]})); });
  TensorRef sum = reduce("sum", "reduction", f32, {4}, Reducer::Sum, {10},
                         [&](const V& i, const V& r) { return at(e, {i[0], r[0]}); });
  TensorRef y = compute("softmax", "broadcast", f32, {4, 10}, [&](const V& i) { return at(e, i) / at(sum, {i[0]}); });
  DagAnalysis an(make_dag({y}));
  EXPECT_FALSE(an.needs_multi_level_tiling(mx.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(sum.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(e.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(y.get()));
  EXPECT_TRUE(an.is_simple_access(e.get()));
  EXPECT_TRUE(an.is_inlineable(e.get()));
  EXPECT_FALSE(an.is_strictly_inlineable(e.get()));  // exp would be recomputed by both readers
  EXPECT_TRUE(an.is_strictly_inlineable(y.get()));
  EXPECT_FALSE(an.is_inlineable(sum.get()));
  EXPECT_EQ(names(an.direct_consumers(e.get())), (Names{"sum", "softmax"}));
  EXPECT_EQ(names(an.direct_consumers(x.get())), (Names{"max", "exp"}));
  EXPECT_FALSE(an.elementwise_match(e.get(), y.get()));  // exp has two readers
  EXPECT_EQ(an.num_common_outer_iterators(x.get(), e.get()), 1);  // through max as well as directly
  EXPECT_EQ(an.num_common_outer_iterators(mx.get(), e.get()), 1);
  EXPECT_EQ(an.num_common_outer_iterators(e.get(), y.get()), 1);  // via sum, which keeps rows only
  EXPECT_EQ(an.flops(e.get()), 40 * 2);
}

// The pieces of a layer norm over rows of x[4, 16], with a learned scale and shift.
TEST(Analysis, LayerNormPieces) {
  TensorRef x = placeholder("x", f32, {4, 16});
  TensorRef gamma = placeholder("gamma", f32, {16}), beta = placeholder("beta", f32, {16});
  TensorRef total = reduce("total", "reduction", f32, {4}, Reducer::Sum, {16},
                           [&](const V& i, const V& r) { return at(x, {i[0], r[0]}); });
  TensorRef mean = compute("mean", "elementwise", f32, {4},
                           [&](const V& i) { return at(total, i) / float_imm(16.0); });
  TensorRef sq = reduce("sq", "reduction", f32, {4}, Reducer::Sum, {16}, [&](const V& i, const V& r) {
    Expr d = at(x, {i[0], r[0]}) - at(mean, i);
    return d * d;
  });
  TensorRef norm = compute("norm", "broadcast", f32, {4, 16}, [&](const V& i) {
    Expr inv = unary(ExprOp::Sqrt, at(sq, {i[0]}) / float_imm(16.0) + float_imm(1e-5));
    return (at(x, i) - at(mean, {i[0]})) / inv * at(gamma, {i[1]}) + at(beta, {i[1]});
  });
  DagAnalysis an(make_dag({norm}));
  EXPECT_FALSE(an.needs_multi_level_tiling(total.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(sq.get()));
  EXPECT_TRUE(an.is_strictly_inlineable(mean.get()));
  EXPECT_TRUE(an.should_always_inline(mean.get()));
  // Sqrt is not expensive; the final stage is simple and strictly inlineable, but as an output it
  // stays, and with row vectors (mean, sq) and column vectors (gamma, beta) it counts four
  // operands that miss an axis: Ansor's rule tiles it like an outer product.
  EXPECT_TRUE(an.is_strictly_inlineable(norm.get()));
  EXPECT_TRUE(an.needs_multi_level_tiling(norm.get()));
  EXPECT_EQ(names(an.consumers(total.get(), inlined({mean.get()}))), (Names{"sq", "norm"}));
  EXPECT_EQ(names(an.producers(norm.get(), inlined({mean.get()}))), (Names{"x", "gamma", "beta", "total", "sq"}));
  EXPECT_EQ(names(an.producers(sq.get(), inlined({mean.get()}))), (Names{"x", "total"}));
}

TEST(Analysis, TransposeIsSimpleButReshapeIsNot) {
  TensorRef a = placeholder("A", f32, {4, 4});
  TensorRef r = relu("relu", a);
  TensorRef tr = compute("transpose", "injective", f32, {4, 4}, [&](const V& i) { return at(r, {i[1], i[0]}); });
  TensorRef rs = compute("reshape", "injective", f32, {2, 8}, [&](const V& i) {
    Expr flat = i[0] * 8 + i[1];
    return at(tr, {floordiv(flat, int_imm(4)), floormod(flat, int_imm(4))});
  });
  DagAnalysis an(make_dag({rs}));
  EXPECT_TRUE(an.is_simple_access(tr.get()));
  EXPECT_TRUE(an.is_strictly_inlineable(tr.get()));
  EXPECT_FALSE(an.is_simple_access(rs.get()));
  EXPECT_TRUE(an.is_inlineable(rs.get()));
  EXPECT_FALSE(an.is_strictly_inlineable(rs.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(tr.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(rs.get()));
  EXPECT_EQ(an.num_common_outer_iterators(r.get(), tr.get()), 0);  // r[i1, i0]: no loop in common
  EXPECT_FALSE(an.elementwise_match(r.get(), tr.get()));
  EXPECT_EQ(an.num_common_outer_iterators(tr.get(), rs.get()), 0);
  EXPECT_EQ(an.flops(tr.get()), 0);  // a load is free
}

TEST(Analysis, BroadcastAddsAndScalarOperands) {
  TensorRef a = placeholder("a", f32, {4, 8}), b = placeholder("b", f32, {8});
  TensorRef col = placeholder("col", f32, {4, 1}), row = placeholder("row", f32, {1, 8});
  TensorRef s = placeholder("s", f32, {});
  TensorRef add = compute("add", "broadcast", f32, {4, 8}, [&](const V& i) { return at(a, i) + at(b, {i[1]}); });
  TensorRef outer = compute("outer", "broadcast", f32, {4, 8},
                            [&](const V& i) { return at(col, {i[0], int_imm(0)}) + at(row, {int_imm(0), i[1]}); });
  TensorRef scaled = compute("scaled", "broadcast", f32, {4, 8},
                             [&](const V& i) { return at(add, i) * at(s, {}) + at(b, {i[1]}); });
  DagAnalysis an(make_dag({outer, scaled}));
  EXPECT_TRUE(an.is_simple_access(add.get()));
  EXPECT_TRUE(an.is_strictly_inlineable(add.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(add.get()));  // one operand misses an axis, no reduction
  EXPECT_TRUE(an.is_simple_access(outer.get()));          // constant indices are simple
  EXPECT_TRUE(an.needs_multi_level_tiling(outer.get()));  // two operands each miss an axis
  // A scalar is one value in a register: it is not an operand with reuse to tile for.
  EXPECT_FALSE(an.needs_multi_level_tiling(scaled.get()));
  EXPECT_TRUE(an.is_output(outer.get()));
  EXPECT_TRUE(an.is_output(scaled.get()));
  EXPECT_FALSE(an.is_output(add.get()));
  EXPECT_TRUE(an.elementwise_match(add.get(), scaled.get()));
  EXPECT_EQ(names(an.direct_consumers(b.get())), (Names{"add", "scaled"}));
}

TEST(Analysis, ExpensiveOpsBlockStrictInliningOnly) {
  TensorRef x = placeholder("x", f32, {8});
  auto stage = [&](const std::string& name, ExprOp op) {
    return compute(name, "elementwise", f32, {8}, [&](const V& i) { return unary(op, at(x, i)); });
  };
  TensorRef sig = stage("sigmoid", ExprOp::Sigmoid), th = stage("tanh", ExprOp::Tanh),
            sq = stage("sqrt", ExprOp::Sqrt), ab = stage("abs", ExprOp::Abs);
  TensorRef pw = compute("pow", "elementwise", f32, {8},
                         [&](const V& i) { return binary(ExprOp::Pow, at(x, i), float_imm(3.0)); });
  DagAnalysis an(make_dag({sig, th, sq, ab, pw}));
  for (const TensorRef& t : {sig, th, pw}) {
    EXPECT_TRUE(an.is_simple_access(t.get())) << t->name;
    EXPECT_TRUE(an.is_inlineable(t.get())) << t->name;
    EXPECT_FALSE(an.is_strictly_inlineable(t.get())) << t->name;
  }
  for (const TensorRef& t : {sq, ab}) EXPECT_TRUE(an.is_strictly_inlineable(t.get())) << t->name;
}

// SiLU after a matmul: the sigmoid is expensive but read once, at its own index, by its only
// reader, so it inlines there and the matmul reaches the Mul elementwise (and so gets it fused).
// Read twice, by a reduction, or through a transpose, it does not.
TEST(Analysis, AnExpensiveStageReadOnceByItsOnlyReaderInlinesIntoIt) {
  TensorRef a = placeholder("A", f32, {4, 8}), b = placeholder("B", f32, {8, 4});
  TensorRef mm = matmul("mm", a, b);
  TensorRef sig = compute("sig", "elementwise", f32, {4, 4}, [&](const V& i) { return unary(ExprOp::Sigmoid, at(mm, i)); });
  TensorRef silu = compute("silu", "elementwise", f32, {4, 4}, [&](const V& i) { return at(mm, i) * at(sig, i); });
  DagAnalysis an(make_dag({silu}));
  EXPECT_FALSE(an.is_strictly_inlineable(sig.get()));
  EXPECT_TRUE(an.inlines_into_its_reader(sig.get()));
  EXPECT_TRUE(an.should_always_inline(sig.get()));
  EXPECT_FALSE(an.inlines_into_its_reader(silu.get()));  // the output
  EXPECT_TRUE(an.elementwise_match(mm.get(), silu.get()));
  EXPECT_TRUE(an.elementwise_match(sig.get(), silu.get()));

  TensorRef sig2 = compute("sig2", "elementwise", f32, {4, 4}, [&](const V& i) { return unary(ExprOp::Sigmoid, at(mm, i)); });
  TensorRef twice = compute("twice", "elementwise", f32, {4, 4}, [&](const V& i) { return at(sig2, i) * at(sig2, i); });
  TensorRef sig3 = compute("sig3", "elementwise", f32, {4, 4}, [&](const V& i) { return unary(ExprOp::Sigmoid, at(mm, i)); });
  TensorRef rowsum = reduce("rowsum", "reduction", f32, {4}, Reducer::Sum, {4},
                            [&](const V& i, const V& r) { return at(sig3, {i[0], r[0]}); });
  TensorRef sig4 = compute("sig4", "elementwise", f32, {4, 4}, [&](const V& i) { return unary(ExprOp::Sigmoid, at(mm, i)); });
  TensorRef transposed = compute("transposed", "elementwise", f32, {4, 4}, [&](const V& i) { return at(sig4, {i[1], i[0]}); });
  TensorRef via_t = compute("via_t", "elementwise", f32, {4, 4}, [&](const V& i) { return at(mm, i) + at(transposed, i); });
  DagAnalysis an2(make_dag({twice, rowsum, via_t}));
  EXPECT_FALSE(an2.inlines_into_its_reader(sig2.get()));  // read twice: inlining would compute it twice
  EXPECT_FALSE(an2.inlines_into_its_reader(sig3.get()));  // read inside a reduction
  EXPECT_TRUE(an2.inlines_into_its_reader(transposed.get()));  // a transpose is a simple read, once
  EXPECT_FALSE(an2.inlines_into_its_reader(sig4.get()));  // read at the transposed index
  EXPECT_FALSE(an2.elementwise_match(sig4.get(), via_t.get()));  // through the transpose
}

TEST(Analysis, InlinedStagesAreLookedThroughWithoutDuplicates) {
  // a -> b -> d, a -> c -> d, a -> d: with b and c inlined, a's only consumer is d, listed once.
  TensorRef x = placeholder("x", f32, {8});
  TensorRef a = relu("a", x), b = relu("b", a), c = relu("c", a);
  TensorRef d = compute("d", "elementwise", f32, {8}, [&](const V& i) { return at(a, i) + at(b, i) + at(c, i); });
  DagAnalysis an(make_dag({d}));
  EXPECT_EQ(names(an.direct_consumers(a.get())), (Names{"b", "c", "d"}));
  EXPECT_EQ(names(an.consumers(a.get(), inlined({b.get(), c.get()}))), (Names{"d"}));
  EXPECT_EQ(names(an.consumers(a.get(), inlined({b.get()}))), (Names{"c", "d"}));
  EXPECT_EQ(names(an.producers(d.get(), inlined({b.get(), c.get()}))), (Names{"a"}));
  EXPECT_EQ(names(an.producers(d.get(), inlined({a.get(), b.get(), c.get()}))), (Names{"x"}));
  EXPECT_TRUE(an.elementwise_match(a.get(), d.get()));  // b and c inline into d, its one other reader
  EXPECT_EQ(an.num_common_outer_iterators(a.get(), d.get()), 1);
  EXPECT_EQ(an.num_common_outer_iterators(x.get(), d.get()), 1);
  TensorRef e = relu("e", a);  // a second output reading a: now a has two readers that stay
  DagAnalysis an2(make_dag({d, e}));
  EXPECT_FALSE(an2.elementwise_match(a.get(), d.get()));
}

TEST(Analysis, ExternStagesHaveNoAccessFacts) {
  TensorRef x = placeholder("x", f32, {8});
  Node node;
  node.name = "topk";
  node.op_type = "TopK";
  TensorRef k = extern_stage("topk", node, {x}, 0, f32, {3});
  TensorRef r = relu("relu", k);
  DagAnalysis an(make_dag({r}));
  EXPECT_FALSE(an.is_simple_access(k.get()));
  EXPECT_FALSE(an.is_inlineable(k.get()));
  EXPECT_FALSE(an.is_strictly_inlineable(k.get()));
  EXPECT_FALSE(an.needs_multi_level_tiling(k.get()));
  EXPECT_EQ(an.flops(k.get()), 0);
  EXPECT_EQ(names(an.direct_producers(k.get())), (Names{"x"}));
  EXPECT_EQ(names(an.direct_consumers(x.get())), (Names{"topk"}));
  EXPECT_EQ(an.num_common_outer_iterators(x.get(), k.get()), 0);
  EXPECT_FALSE(an.elementwise_match(x.get(), k.get()));
  EXPECT_FALSE(an.elementwise_match(k.get(), r.get()));  // a kernel cannot be tiled with relu fused
}

TEST(Analysis, ATensorOutsideTheDagIsAnError) {
  TensorRef x = placeholder("x", f32, {8}), other = placeholder("other", f32, {8});
  DagAnalysis an(make_dag({relu("relu", x)}));
  try {
    (void)an.is_output(other.get());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'other'"), std::string::npos) << e.what();
  }
}

// Real op lowerings: Conv (bias, pad 1) + Relu as one task, as the tuner will see it. The padded
// input is a stage of its own that no rule inlines without searching: its reads are offset.
TEST(Analysis, LoweredConvBiasReluTask) {
  Graph g = kiln::testing::load_built(kiln::testing::conv_bias_relu_model());
  std::vector<Task> tasks = extract_tasks(g, partition_graph(g));
  ASSERT_EQ(tasks.size(), 1u);
  const ComputeDAG& dag = tasks[0].dag;
  ASSERT_EQ(dag.tensors.size(), 4u) << print_dag(dag);
  const TensorNode *pad = dag.tensors[0].get(), *conv = dag.tensors[1].get(), *bias = dag.tensors[2].get(),
                   *act = dag.tensors[3].get();
  DagAnalysis an(dag);
  EXPECT_EQ(pad->stage->tag, "pad");
  EXPECT_TRUE(an.is_inlineable(pad));
  EXPECT_FALSE(an.should_always_inline(pad));
  EXPECT_FALSE(an.needs_multi_level_tiling(pad));
  EXPECT_TRUE(an.needs_multi_level_tiling(conv)) << print_analysis(dag);
  EXPECT_FALSE(an.is_inlineable(conv));
  EXPECT_TRUE(an.is_strictly_inlineable(bias)) << print_analysis(dag);
  EXPECT_TRUE(an.should_always_inline(bias));
  EXPECT_TRUE(an.is_strictly_inlineable(act));
  EXPECT_TRUE(an.is_output(act));
  EXPECT_FALSE(an.needs_multi_level_tiling(bias));
  EXPECT_FALSE(an.needs_multi_level_tiling(act));
  EXPECT_TRUE(an.elementwise_match(conv, act));
  EXPECT_EQ(an.num_common_outer_iterators(conv, act), 4);
  double total = 0;
  for (const TensorRef& t : dag.tensors) total += an.flops(t.get());
  EXPECT_EQ(total, tasks[0].flops);
}

// Attention's MatMuls need tiling; its Softmax stages do not, and only its cheap stages inline strictly.
TEST(Analysis, LoweredAttentionTasks) {
  Graph g = kiln::testing::load_built(kiln::testing::attention_model());
  int matmuls = 0;
  for (const Task& task : extract_tasks(g, partition_graph(g))) {
    DagAnalysis an(task.dag);
    for (const TensorRef& t : task.dag.tensors) {
      const Stage& s = *t->stage;
      if (s.tag == "matmul") {
        ++matmuls;
        EXPECT_TRUE(an.needs_multi_level_tiling(t.get())) << print_analysis(task.dag);
      } else {
        EXPECT_FALSE(an.needs_multi_level_tiling(t.get())) << t->name << "\n" << print_analysis(task.dag);
      }
      if (s.tag == "reduction") {
        EXPECT_FALSE(an.is_inlineable(t.get())) << t->name;
      }
    }
  }
  EXPECT_EQ(matmuls, 2);
}

}  // namespace
}  // namespace kiln::te
