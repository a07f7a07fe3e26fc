#include "frontend/layout/int8_dot_layout.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/layout/block_layout.h"
#include "frontend/passes/drop_qdq_moves.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/reference/interpreter.h"
#include "targets/target.h"
#include "tests/frontend/test_models.h"
#include "toolchain/layout_target.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

struct QConv {
  int64_t in = 8, out = 8, group = 1, kernel = 3, stride = 1, pad = 1;
  int64_t kernel_w = 0;  // the kernel's width when it is not `kernel`
  DType x = DType::Int8, w = DType::Int8;
  int64_t x_zero = -3, w_zero = 0;
  bool bias = true;
};

// A QLinearConv `name` reading `x` with weights from a fixed sequence.
void qconv(ModelBuilder& b, const std::string& x, const std::string& name, const QConv& c) {
  const int64_t kw = c.kernel_w ? c.kernel_w : c.kernel;
  std::vector<int64_t> w(static_cast<size_t>(c.out * c.in / c.group * c.kernel * kw));
  const int64_t lo = c.w == DType::Int8 ? -128 : 0;
  for (size_t i = 0; i < w.size(); ++i) w[i] = lo + static_cast<int64_t>((i * 89 + 7) % 256);
  b.initializer(name + ".w", Tensor::from_ints(c.w, {c.out, c.in / c.group, c.kernel, kw}, w));
  b.initializer(name + ".xs", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.05}));
  b.initializer(name + ".xz", Tensor::from_ints(c.x, {}, std::vector<int64_t>{c.x_zero}));
  std::vector<double> ws(static_cast<size_t>(c.out));
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = 0.0005 * static_cast<double>(i + 1);
  b.initializer(name + ".ws", Tensor::from_doubles(DType::Float32, {c.out}, ws));
  b.initializer(name + ".wz", Tensor::from_ints(c.w, {c.out}, std::vector<int64_t>(static_cast<size_t>(c.out), c.w_zero)));
  b.initializer(name + ".ys", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.1}));
  b.initializer(name + ".yz", Tensor::from_ints(c.x, {}, std::vector<int64_t>{c.x == DType::Int8 ? 5 : 130}));
  std::vector<std::string> ins{x, name + ".xs", name + ".xz", name + ".w", name + ".ws", name + ".wz", name + ".ys", name + ".yz"};
  if (c.bias) {
    std::vector<int64_t> bias(static_cast<size_t>(c.out));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<int64_t>(i * 1000) - 3000;
    b.initializer(name + ".b", Tensor::from_ints(DType::Int32, {c.out}, bias));
    ins.push_back(name + ".b");
  }
  b.node("QLinearConv", ins, {name})
      .attr("group", c.group)
      .attr("strides", std::vector<int64_t>{c.stride, c.stride})
      .attr("pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad});
}

// A 3x3 conv of `out` outputs over 8 channels of `x` codes.
QConv conv_of(DType x, int64_t out) {
  QConv c;
  c.x = x;
  c.x_zero = x == DType::Int8 ? -3 : 131;
  c.out = out;
  return c;
}

Tensor input_of(DType t, const Shape& s) {
  std::vector<int64_t> v(static_cast<size_t>(num_elements(s)));
  const int64_t lo = t == DType::Int8 ? -128 : 0;
  for (size_t i = 0; i < v.size(); ++i) v[i] = lo + static_cast<int64_t>((i * 37 + 11) % 256);
  return Tensor::from_ints(t, s, v);
}

// Convs that run as four-byte dot products: int8 and uint8 inputs, strides, padding, groups of whole
// quads of channels, with and without a bias (quads of channels); a depthwise conv and a
// one-channel input under a 5x6 kernel at stride 2 (quads of kernel-row taps, the second 2 of them
// with half padding).
ModelBuilder dot4_convs(DType x) {
  ModelBuilder b("int8_dot", 13);
  b.input("x", x, Shape{1, 8, 7, 9});
  b.input("x1", x, Shape{1, 1, 11, 10});
  QConv plain;
  plain.x = x;
  plain.x_zero = x == DType::Int8 ? -3 : 131;
  qconv(b, "x", "a", plain);
  QConv strided = plain;
  strided.out = 12, strided.stride = 2, strided.bias = false;
  qconv(b, "a", "b", strided);
  QConv grouped = plain;
  grouped.in = 12, grouped.out = 6, grouped.group = 3, grouped.kernel = 1, grouped.pad = 0;  // 4 channels a group
  qconv(b, "b", "c", grouped);
  QConv depthwise = plain;
  depthwise.in = 6, depthwise.out = 6, depthwise.group = 6;
  qconv(b, "c", "d", depthwise);
  QConv one_channel = plain;
  one_channel.in = 1, one_channel.kernel = 5, one_channel.kernel_w = 6, one_channel.stride = 2, one_channel.pad = 2;
  qconv(b, "x1", "e", one_channel);
  b.output("a", x, Shape{1, 8, 7, 9});
  b.output("d", x, Shape{1, 6, 4, 5});
  b.output("e", x, Shape{1, 8, 6, 5});
  return b;
}

int dot4_count(const Graph& g) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
    return n.domain == "kiln" && n.op_type == "QLinearConvDot4";
  }));
}

// Compiles `laid_out` (the graph after use_int8_dot_products) for `target`, runs it on `in` and
// expects the integers `original` computes in the reference interpreter.
void expect_reference_integers(const Graph& original, const Graph& laid_out, const std::string& target,
                               const std::map<std::string, Tensor>& in) {
  SCOPED_TRACE(target);
  testing::TempDir dir;
  testing::HostPackage pkg(laid_out, dir, target);
  const std::vector<Tensor> want = run_reference(original, in), got = pkg.run(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) EXPECT_EQ(got[o].to_ints(), want[o].to_ints()) << "output " << o;
}

// What the layout stage makes of `pkg`'s graph for the host target (its dump).
std::string host_layout(testing::HostPackage& pkg, testing::TempDir& dir) {
  std::string layout;
  PipelineOptions o;
  o.stop_after = "layout";
  o.dump = StageDump({"layout"}, [&](const std::string& text) { layout += text; });
  CompileOptions c;
  c.target = resolve_target("host");
  compile_graph(pkg.graph(), c, dir.path("unused"), o);
  return layout;
}

TEST(Int8DotLayout, SymmetricConvsOfWholeChannelQuadsMove) {
  for (DType x : {DType::Int8, DType::UInt8}) {
    ModelBuilder b = dot4_convs(x);
    Graph g = testing::prepared_graph(b);
    EXPECT_EQ(use_int8_dot_products(g), 5) << dtype_name(x);
    EXPECT_EQ(dot4_count(g), 5);
  }
}

TEST(Int8DotLayout, AsymmetricWeightsAndNarrowUnevenConvsStay) {
  ModelBuilder b("int8_dot_stays", 13);
  b.input("x", DType::Int8, Shape{1, 8, 7, 9});
  QConv asymmetric;
  asymmetric.w_zero = 2;
  qconv(b, "x", "asym", asymmetric);
  QConv six;
  six.out = 6;
  qconv(b, "asym", "six", six);
  QConv uneven;  // 6 input channels (a quad and a half) under a 1x1 kernel: no quads either way
  uneven.in = 6, uneven.kernel = 1, uneven.pad = 0;
  qconv(b, "six", "uneven", uneven);
  QConv uneven3;  // 6 channels under 3x3: quads of kernel-row taps
  uneven3.in = 6, uneven3.out = 6;
  qconv(b, "six", "six3", uneven3);
  b.output("uneven", DType::Int8, Shape{1, 8, 7, 9});
  b.output("six3", DType::Int8, Shape{1, 6, 7, 9});
  Graph g = testing::prepared_graph(b);
  EXPECT_EQ(use_int8_dot_products(g), 2) << "8 -> 6 and the 3x3 over 6; not the asymmetric one nor the 1x1 over 6";
  EXPECT_EQ(dot4_count(g), 2);
}

// The dot-product form computes the reference's integers: compiled for x86-64 without VNNI the
// Dot4 terms expand into byte multiplies (this runs on every x86 machine). Both forms: unsigned
// by signed bytes (x86's, int8 inputs shifted by +128) and signed by signed (AArch64's sdot, uint8
// inputs shifted by -128), which the expansion computes as sdot does.
TEST(Int8DotConv, ExpandedDotProductsMatchTheReferenceExactly) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "runs x86-64 code";
#endif
  for (const bool signed_bytes : {false, true})
    for (DType x : {DType::Int8, DType::UInt8}) {
      SCOPED_TRACE(dtype_name(x) + (signed_bytes ? " s8s8" : " u8s8"));
      ModelBuilder b = dot4_convs(x);
      const Graph original = testing::prepared_graph(b);
      Graph g = original;
      ASSERT_EQ(use_int8_dot_products(g, signed_bytes), 5);
      expect_reference_integers(original, g, "x86_64-generic",
                                {{"x", input_of(x, {1, 8, 7, 9})}, {"x1", input_of(x, {1, 1, 11, 10})}});
    }
}

// Which targets lay int8 out as dot products, and in which form: every x86-64 one (vpdpbusd, or
// its expansion), AArch64 with +dotprod (sdot), a Cortex-M with the DSP extension (SMLAD, unsigned
// by signed bytes as x86's), not AArch64 without +dotprod (NEON's expansion measured more
// instructions than the per-channel form), nor an Arm core without DSP.
TEST(Int8DotLayout, TargetsWithADotProductOrAFasterExpansion) {
  for (const char* name : {"x86_64-generic", "x86_64-avx2", "x86_64-avx512", "x86_64-avx512-vnni", "x86_64-avx2-vnni"}) {
    const LayoutTarget t = layout_target(load_target(name));
    EXPECT_TRUE(t.int8_dot && !t.signed_dot) << name;
  }
  const LayoutTarget n1 = layout_target(load_target("aarch64-neoverse-n1"));
  EXPECT_TRUE(n1.int8_dot && n1.signed_dot);
  for (const char* name : {"cortex-m4", "cortex-m7"}) {
    const LayoutTarget t = layout_target(load_target(name));
    EXPECT_TRUE(t.int8_dot && !t.signed_dot) << name;
  }
  for (const char* name : {"aarch64-cortex-a72", "aarch64-cortex-a53"}) EXPECT_FALSE(layout_target(load_target(name)).int8_dot) << name;
  EXPECT_FALSE(layout_target(32, "thumbv7m-none-eabi", "").int8_dot);  // a Cortex-M3: no DSP extension
  ModelBuilder b = dot4_convs(DType::UInt8);
  Graph g = testing::prepared_graph(b);
  ASSERT_EQ(use_int8_dot_products(g, true), 5);
  for (const Node& n : g.nodes)
    if (n.domain == "kiln") {
      EXPECT_EQ(n.attr_string("dot", ""), "s8s8") << n.name;
    }
}

// On a CPU with AVX512-VNNI the host target lays the convs out as dot products itself and runs them
// as vpdpbusd: the same integers.
TEST(Int8DotConv, VnniDotProductsMatchTheReferenceExactly) {
  if (host_target_name() != "x86_64-avx512-vnni") GTEST_SKIP() << "this CPU has no AVX512-VNNI";
  for (DType x : {DType::Int8, DType::UInt8}) {
    SCOPED_TRACE(dtype_name(x));
    ModelBuilder b = dot4_convs(x);
    testing::TempDir dir;
    testing::HostPackage pkg(b, dir);
    const std::string layout = host_layout(pkg, dir);
    EXPECT_NE(layout.find("QLinearConvDot4"), std::string::npos) << layout;
    const std::map<std::string, Tensor> in = {{"x", input_of(x, {1, 8, 7, 9})}, {"x1", input_of(x, {1, 1, 11, 10})}};
    const std::vector<Tensor> want = run_reference(pkg.graph(), in), got = pkg.run(in);
    ASSERT_EQ(got.size(), 3u);
    for (size_t o2 = 0; o2 < got.size(); ++o2) EXPECT_EQ(got[o2].to_ints(), want[o2].to_ints()) << "output " << o2;
  }
}

// Convs that accumulate in blocks of output channels (int8_dot_conv_lowering.cc): 20 outputs (a
// padded last block for blocks of 8 and 16), then 16 at stride 2 without a bias, and 16 over a
// 3-channel image (quads of kernel-row taps); a grouped one and one of 6 outputs keep NCHW rows.
// Against the reference, exactly, with blocks of 16 and 8, on x86_64-generic (the expansion) and on
// the host when it has VNNI.
TEST(Int8DotConv, OutputChannelBlocksMatchTheReferenceExactly) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "runs x86-64 code";
#endif
  for (DType x : {DType::Int8, DType::UInt8}) {
    SCOPED_TRACE(dtype_name(x));
    ModelBuilder b("int8_dot_blocks", 13);
    b.input("x", x, Shape{1, 8, 7, 9});
    b.input("x3", x, Shape{1, 3, 11, 10});
    const QConv wide = conv_of(x, 20);
    qconv(b, "x", "a", wide);
    QConv strided = wide;
    strided.in = 20, strided.out = 16, strided.stride = 2, strided.bias = false;
    qconv(b, "a", "b", strided);
    QConv grouped = wide;
    grouped.in = 16, grouped.out = 16, grouped.group = 4, grouped.kernel = 1, grouped.pad = 0;
    qconv(b, "b", "c", grouped);
    QConv narrow = wide;
    narrow.in = 16, narrow.out = 6;
    qconv(b, "c", "d", narrow);
    QConv image = wide;  // 3 channels under a 5x6 kernel at stride 2: quads of kernel-row taps
    image.in = 3, image.out = 16, image.kernel = 5, image.kernel_w = 6, image.stride = 2, image.pad = 2;
    qconv(b, "x3", "i", image);
    b.output("a", x, Shape{1, 20, 7, 9});
    b.output("d", x, Shape{1, 6, 4, 5});
    b.output("i", x, Shape{1, 16, 6, 5});
    const Graph original = testing::prepared_graph(b);
    const std::map<std::string, Tensor> in = {{"x", input_of(x, {1, 8, 7, 9})}, {"x3", input_of(x, {1, 3, 11, 10})}};
    for (const int64_t block : {16, 8}) {
      SCOPED_TRACE(block);
      Graph g = original;
      ASSERT_EQ(use_int8_dot_products(g, false, block), 5);
      std::vector<int64_t> blocks;
      for (const Node& n : g.nodes)
        if (n.domain == "kiln") blocks.push_back(n.attr_int("block", 1));
      EXPECT_EQ(blocks, (std::vector<int64_t>{block, block, 1, 1, block}));
      expect_reference_integers(original, g, "x86_64-generic", in);
      if (host_target_name() == "x86_64-avx512-vnni") expect_reference_integers(original, g, "host", in);
    }
  }
}

// A conv, a depthwise one after it (stride 2), feeding two, their dequantized outputs concatenated,
// pooled and quantized again, a last conv of 20 outputs (a padded block of 8 or 16); x is
// [1, 8, 9, 9].
ModelBuilder codes_between_convs(DType x) {
  ModelBuilder b("int8_blocks_between", 13);
  b.input("x", x, Shape{1, 8, 9, 9});
  const QConv conv = conv_of(x, 32);
  qconv(b, "x", "a", conv);
  QConv depthwise = conv;
  depthwise.in = 32, depthwise.group = 32, depthwise.stride = 2;
  qconv(b, "a", "dw", depthwise);
  QConv squeeze = conv;
  squeeze.in = 32, squeeze.out = 16, squeeze.kernel = 1, squeeze.pad = 0;
  qconv(b, "dw", "s", squeeze);
  QConv expand = conv;
  expand.in = 32, expand.out = 16;
  qconv(b, "dw", "e", expand);
  b.node("DequantizeLinear", {"s", "s.ys", "s.yz"}, {"sf"});
  b.node("DequantizeLinear", {"e", "e.ys", "e.yz"}, {"ef"});
  b.node("Concat", {"sf", "ef"}, {"cf"}).attr("axis", int64_t{1});
  b.node("MaxPool", {"cf"}, {"pf"})
      .attr("kernel_shape", std::vector<int64_t>{2, 2})
      .attr("strides", std::vector<int64_t>{2, 2});
  b.initializer("q.s", Tensor::scalar_double(DType::Float32, 0.07));
  b.initializer("q.z", Tensor::from_ints(x, {}, std::vector<int64_t>{x == DType::Int8 ? -10 : 118}));
  b.node("QuantizeLinear", {"pf", "q.s", "q.z"}, {"p"});
  QConv last = conv;
  last.in = 32, last.out = 20;
  last.x_zero = x == DType::Int8 ? -10 : 118;  // the quantized pool's zero point
  qconv(b, "p", "d", last);
  b.output("d", x, Shape{1, 20, 2, 2});
  return b;
}

// The blocked int8 ops' own reference kernels (QLinearConvBlocked on an NCHW input, on blocks and depthwise,
// MaxPoolBlocked of codes, a Concat and (de)quantizations on blocks) give the NCHW graph's codes, in
// blocks of 8 and 16.
TEST(Int8DotLayout, BlockedCodesComputeWhatNchwComputesInTheReference) {
  for (DType x : {DType::UInt8, DType::Int8})
    for (const int64_t block : {8, 16}) {
      SCOPED_TRACE(dtype_name(x) + " in blocks of " + std::to_string(block));
      ModelBuilder b = codes_between_convs(x);
      Graph g = testing::prepared_graph(b);
      quantize_before_moves(g);
      ASSERT_EQ(use_int8_dot_products(g, false, block), 5);
      const std::map<std::string, Tensor> in = {{"x", input_of(x, {1, 8, 9, 9})}};
      const std::vector<Tensor> nchw = run_reference(g, in);
      EXPECT_EQ(block_layout(g, block), 5);
      remove_dead_nodes(g);
      EXPECT_EQ(testing::op_types(g), (std::vector<std::string>{"QLinearConvBlocked", "QLinearConvBlocked", "QLinearConvBlocked",
                                                                "QLinearConvBlocked", "DequantizeLinear", "DequantizeLinear",
                                                                "QuantizeLinear", "QuantizeLinear", "Concat", "MaxPoolBlocked",
                                                                "QLinearConvBlocked", "ReorderFromBlocked"}));
      EXPECT_EQ(run_reference(g, in)[0].to_ints(), nchw[0].to_ints());
    }
}

// On a host with 256- or 512-bit vectors the codes between blocked int8 convs stay in the blocks
// (codes_between_convs; the quantization moved before the Concat and the pool by
// quantize_before_moves), the depthwise conv's too. One
// reorder out (the first conv reads its NCHW input as it is); the reference's integers.
TEST(Int8DotConv, CodesBetweenBlockedConvsStayInBlocks) {
  const std::optional<std::string> host = host_target_name();
  if (!host || load_target(*host).vector_bits < 256 || load_target(*host).triple.rfind("x86_64", 0) != 0)
    GTEST_SKIP() << "no x86-64 host with 256- or 512-bit vectors";
  for (DType x : {DType::UInt8, DType::Int8}) {
    SCOPED_TRACE(dtype_name(x));
    ModelBuilder b = codes_between_convs(x);
    testing::TempDir dir;
    testing::HostPackage pkg(b, dir);
    const std::string layout = host_layout(pkg, dir);
    std::map<std::string, int> ops;
    for (const char* op : {"QLinearConvBlocked(", "ReorderToBlocked(", "ReorderFromBlocked(", "MaxPoolBlocked(", "Concat("})
      for (size_t at = layout.find(op); at != std::string::npos; at = layout.find(op, at + 1)) ++ops[op];
    EXPECT_EQ(ops["QLinearConvBlocked("], 5) << layout;
    EXPECT_EQ(ops["ReorderToBlocked("], 0) << layout;  // the first conv reads x in NCHW
    EXPECT_EQ(ops["ReorderFromBlocked("], 1) << layout;
    EXPECT_EQ(ops["MaxPoolBlocked("], 1) << layout;
    const std::map<std::string, Tensor> in = {{"x", input_of(x, {1, 8, 9, 9})}};
    EXPECT_EQ(pkg.run(in)[0].to_ints(), run_reference(pkg.graph(), in)[0].to_ints());
  }
}

// The block is the target's int32 lanes on x86 with 256- or 512-bit vectors; none for AArch64's sdot
// (4 lanes), a Cortex-M (no vectors) or 128-bit x86.
TEST(Int8DotLayout, OutputBlocksAreTheInt32LanesOfWideX86Vectors) {
  const auto block_of = [](const char* name) {
    const Target t = load_target(name);
    const LayoutTarget l = layout_target(t);
    return int8_output_block(l.vector_bits, l.signed_dot);
  };
  EXPECT_EQ(block_of("x86_64-avx512-vnni"), 16);
  EXPECT_EQ(block_of("x86_64-avx512"), 16);
  EXPECT_EQ(block_of("x86_64-avx2-vnni"), 8);
  EXPECT_EQ(block_of("x86_64-avx2"), 8);
  EXPECT_EQ(block_of("aarch64-neoverse-n1"), 1);
  EXPECT_EQ(block_of("cortex-m4"), 1);
}


// Integer matmuls with a constant int8 B, four k at a time: QLinearMatMul and MatMulInteger, int8
// and uint8 A, a k that is no multiple of 4, B zero points that are not zero (per column), a batch of
// A's rows (3-D A) and a vector A. Against the reference, exactly, on every x86 target the host runs
// (the host's own: vpdpbusd with VNNI; x86_64-generic: the expansion).
ModelBuilder dot4_matmuls(DType a) {
  ModelBuilder b("int8_dot_matmul", 13);
  b.input("a", a, Shape{2, 3, 10});
  b.input("v", a, Shape{10});
  std::vector<int64_t> w(10 * 7);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>((i * 89 + 7) % 256) - 128;
  b.initializer("w", Tensor::from_ints(DType::Int8, {10, 7}, w));
  const int64_t az = a == DType::Int8 ? -5 : 133;
  b.initializer("az", Tensor::from_ints(a, {}, std::vector<int64_t>{az}));
  b.initializer("wz", Tensor::from_ints(DType::Int8, {7}, std::vector<int64_t>{0, 1, -2, 3, 0, -128, 127}));
  b.initializer("wz0", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{0}));
  b.initializer("as", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.05}));
  std::vector<double> ws(7);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = 0.002 * static_cast<double>(i + 1);
  b.initializer("ws", Tensor::from_doubles(DType::Float32, {7}, ws));
  b.initializer("ys", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.3}));
  b.initializer("yz", Tensor::from_ints(a, {}, std::vector<int64_t>{a == DType::Int8 ? 3 : 120}));
  b.node("QLinearMatMul", {"a", "as", "az", "w", "ws", "wz", "ys", "yz"}, {"q"});
  b.node("MatMulInteger", {"a", "w", "az", "wz0"}, {"i"});
  b.node("MatMulInteger", {"v", "w", "az", "wz"}, {"iv"});
  b.output("q", a, Shape{2, 3, 7});
  b.output("i", DType::Int32, Shape{2, 3, 7});
  b.output("iv", DType::Int32, Shape{7});
  return b;
}

TEST(Int8DotMatMul, ConstantInt8MatricesMoveAndMatchTheReferenceExactly) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "runs x86-64 code";
#endif
  for (DType a : {DType::Int8, DType::UInt8}) {
    SCOPED_TRACE(dtype_name(a));
    ModelBuilder b = dot4_matmuls(a);
    const Graph original = testing::prepared_graph(b);
    Graph g = original;
    ASSERT_EQ(use_int8_dot_products(g), 3);
    const std::map<std::string, Tensor> in = {{"a", input_of(a, {2, 3, 10})}, {"v", input_of(a, {10})}};
    for (const char* target : {"host", "x86_64-generic"}) expect_reference_integers(original, g, target, in);
    Graph s8s8 = original;  // AArch64's form, expanded here
    ASSERT_EQ(use_int8_dot_products(s8s8, true), 3);
    expect_reference_integers(original, s8s8, "x86_64-generic", in);
  }
}

TEST(Int8DotMatMul, AMatrixThatIsNotAConstantInt8OneStays) {
  ModelBuilder b("int8_dot_matmul_stays", 13);
  b.input("a", DType::UInt8, Shape{3, 8});
  b.input("b", DType::Int8, Shape{8, 4});  // not a constant
  b.initializer("w", Tensor::from_ints(DType::UInt8, {8, 4}, std::vector<int64_t>(32, 3)));  // uint8
  b.node("MatMulInteger", {"a", "b"}, {"x"});
  b.node("MatMulInteger", {"a", "w"}, {"y"});
  b.output("x", DType::Int32, Shape{3, 4});
  b.output("y", DType::Int32, Shape{3, 4});
  Graph g = testing::prepared_graph(b);
  EXPECT_EQ(use_int8_dot_products(g), 0);
}

}  // namespace
}  // namespace kiln
