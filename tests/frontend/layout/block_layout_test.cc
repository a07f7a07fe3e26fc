#include "frontend/layout/block_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "frontend/ir/error.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::op_types;
using testing::prepared_graph;
using testing::random_weights;

// Lays `g` out in blocks of `block` and checks the outputs are what they were (the reference
// interpreter runs the blocked ops' own kernels). Returns the number of convolutions moved.
int lay_out_and_compare(Graph& g, int64_t block) {
  std::map<std::string, Tensor> in;
  uint32_t seed = 11;
  for (const auto& name : g.inputs) in.emplace(name, random_weights(g.value(name).shape, seed++));
  const std::vector<Tensor> before = run_reference(g, in);
  const int moved = block_layout(g, block);
  remove_dead_nodes(g);
  const std::vector<Tensor> after = run_reference(g, in);
  testing::expect_same_outputs(before, after);
  return moved;
}

void conv(ModelBuilder& b, const std::string& x, const std::string& y, int64_t in, int64_t out, uint32_t seed,
          int64_t stride = 1) {
  b.initializer(y + ".w", random_weights({out, in, 3, 3}, seed));
  b.initializer(y + ".b", random_weights({out}, seed + 1));
  b.node("Conv", {x, y + ".w", y + ".b"}, {y})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1})
      .attr("strides", std::vector<int64_t>{stride, stride});
}

// A residual block: everything from the first conv to the global pooling stays blocked, with one
// reorder in and one out. 3 input channels of a padded conv read as 3 blocks of 1 (the NCHW order);
// 12 channels fill 1.5 blocks of 8.
TEST(BlockLayout, AResidualBlockIsBlockedFromItsFirstConvToTheGlobalPooling) {
  ModelBuilder b("residual", 13);
  b.input("x", DType::Float32, Shape{1, 3, 9, 9});
  b.initializer("scale", random_weights({12, 1, 1}, 50));
  conv(b, "x", "c1", 3, 12, 1);
  b.node("Relu", {"c1"}, {"r1"});
  conv(b, "r1", "c2", 12, 12, 3);
  b.node("Mul", {"c2", "scale"}, {"m"});
  b.node("Add", {"m", "r1"}, {"sum"});
  b.initializer("lo", Tensor::scalar_double(DType::Float32, 0.0));
  b.initializer("hi", Tensor::scalar_double(DType::Float32, 0.5));
  b.node("Clip", {"sum", "lo", "hi"}, {"act"});
  b.node("GlobalAveragePool", {"act"}, {"gap"});
  b.node("Flatten", {"gap"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 8), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Relu", "ConvBlocked", "Mul", "Add",
                                                   "Clip", "ReduceMean", "ReorderFromBlocked", "Flatten"}));
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, (Shape{1, 3, 9, 9, 1}));
  EXPECT_EQ(g.value(g.nodes[1].outputs[0]).shape, (Shape{1, 2, 9, 9, 8}));
  EXPECT_EQ(g.value(g.nodes[1].inputs[1]).shape, (Shape{2, 3, 3, 3, 1, 8}));  // packed weights
}

// An op that cannot run blocked (LRN here) ends the region: reorder out, LRN, reorder back in.
// A blocked value read both blocked and in NCHW is reordered once.
TEST(BlockLayout, ReordersSitOnlyAtTheEdgesOfBlockedRegions) {
  ModelBuilder b("edges", 13);
  b.input("x", DType::Float32, Shape{2, 8, 8, 8});
  conv(b, "x", "c1", 8, 16, 1);
  b.node("Relu", {"c1"}, {"r1"});
  b.node("LRN", {"r1"}, {"p"}).attr("size", int64_t{3});
  conv(b, "p", "c2", 16, 16, 3, 2);
  b.node("Sigmoid", {"r1"}, {"y2"});
  b.output("c2", DType::Float32, Shape{});
  b.output("y2", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 16), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Relu", "ReorderFromBlocked", "LRN",
                                                   "ReorderToBlocked", "ConvBlocked", "Sigmoid", "ReorderFromBlocked",
                                                   "ReorderFromBlocked"}));
}

// MaxPool and AveragePool (padded, ceil_mode, counting the padding or not) pool each channel on its
// own, so they run on the blocks; a MaxPool whose Indices someone reads stays NCHW.
TEST(BlockLayout, PoolsStayBlocked) {
  ModelBuilder b("pools", 13);
  b.input("x", DType::Float32, Shape{2, 4, 11, 11});
  conv(b, "x", "c1", 4, 12, 1);
  b.node("MaxPool", {"c1"}, {"p1"})
      .attr("kernel_shape", std::vector<int64_t>{3, 3})
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("AveragePool", {"p1"}, {"p2"})
      .attr("kernel_shape", std::vector<int64_t>{2, 3})
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{0, 1, 1, 1})
      .attr("ceil_mode", int64_t{1})
      .attr("count_include_pad", int64_t{1});
  b.node("AveragePool", {"p2"}, {"p3"})
      .attr("kernel_shape", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 1, 0, 0});
  conv(b, "p3", "y", 12, 8, 3);
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 8), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "MaxPoolBlocked", "AveragePoolBlocked",
                                                   "AveragePoolBlocked", "ConvBlocked", "ReorderFromBlocked"}));
  EXPECT_EQ(g.value(g.nodes[2].outputs[0]).shape, (Shape{2, 2, 6, 6, 8}));
  EXPECT_EQ(g.value(g.nodes[3].outputs[0]).shape, (Shape{2, 2, 3, 4, 8}));  // ceil_mode drops a window past the input

  ModelBuilder i("indices", 13);
  i.input("x", DType::Float32, Shape{1, 4, 6, 6});
  conv(i, "x", "c", 4, 8, 1);
  i.node("MaxPool", {"c"}, {"p", "where"}).attr("kernel_shape", std::vector<int64_t>{2, 2});
  i.output("p", DType::Float32, Shape{});
  i.output("where", DType::Int64, Shape{});
  Graph h = prepared_graph(i);
  EXPECT_EQ(lay_out_and_compare(h, 8), 1);
  EXPECT_EQ(op_types(h), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "ReorderFromBlocked", "MaxPool"}));
}

// MobileNet-V3's hard-swish divides by a constant, and its squeeze-and-excitation scale is a per-channel
// activation computed in NCHW (Gemms): both stay blocked, the scale reordered (cheap: one value per
// channel) instead of the feature map twice. Dropout is the identity. A blocked divisor, whose padded
// channels would divide 0 by 0, is not blocked.
TEST(BlockLayout, PerChannelScalesDivisionByConstantsAndDropoutStayBlocked) {
  ModelBuilder b("squeeze_excite", 13);
  b.input("x", DType::Float32, Shape{1, 4, 6, 6});
  conv(b, "x", "c", 4, 12, 1);
  b.initializer("six", Tensor::scalar_double(DType::Float32, 6.0));
  b.node("Div", {"c", "six"}, {"d"});
  b.node("GlobalAveragePool", {"d"}, {"gap"});
  b.node("Flatten", {"gap"}, {"flat"});
  b.node("Sigmoid", {"flat"}, {"gate"});
  b.initializer("shape", Tensor::from_ints(DType::Int64, {4}, std::vector<int64_t>{1, 12, 1, 1}));
  b.node("Reshape", {"gate", "shape"}, {"scale"});
  b.node("Mul", {"d", "scale"}, {"se"});
  b.node("Dropout", {"se"}, {"drop"});
  conv(b, "drop", "y", 12, 8, 3);
  b.node("Div", {"y", "y"}, {"ratio"});
  b.output("ratio", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 8), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Div", "ReduceMean", "ReorderFromBlocked",
                                                   "Flatten", "Sigmoid", "Reshape", "ReorderToBlocked", "Mul", "Identity",
                                                   "ConvBlocked", "ReorderFromBlocked", "Div"}));
  EXPECT_EQ(g.value(g.nodes[8].outputs[0]).shape, (Shape{1, 2, 1, 1, 8}));  // the scale, blocked
}

// A depthwise conv on an NCHW input stays NCHW: blocking it would add a reorder that costs about what
// the conv does.
TEST(BlockLayout, ADepthwiseConvOnAnNchwInputStaysNchw) {
  ModelBuilder b("lone_depthwise", 13);
  b.input("x", DType::Float32, Shape{1, 16, 8, 8});
  b.initializer("w", random_weights({16, 1, 3, 3}, 1));
  b.node("Conv", {"x", "w"}, {"d"}).attr("group", int64_t{16}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"d"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 16), 0);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "Relu"}));
}

// An image (fewer than 4 channels) read by an unpadded conv stays one block of all its channels, so
// the reduction's innermost loop covers a pixel's channels; a padded one reads blocks of 1.
TEST(BlockLayout, AnImageIsOneBlockUnlessTheConvPads) {
  for (const int64_t pad : {0, 1}) {
    ModelBuilder b("image", 13);
    b.input("x", DType::Float32, Shape{1, 3, 8, 8});
    b.initializer("w", random_weights({8, 3, 3, 3}, 1));
    b.node("Conv", {"x", "w"}, {"y"}).attr("pads", std::vector<int64_t>{pad, pad, pad, pad});
    b.output("y", DType::Float32, Shape{});
    Graph g = prepared_graph(b);
    EXPECT_EQ(lay_out_and_compare(g, 8), 1);
    EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, pad ? (Shape{1, 3, 8, 8, 1}) : (Shape{1, 1, 8, 8, 3})) << pad;
  }
}

// Concat of whole blocks stays blocked; one with a partial block reads NCHW.
TEST(BlockLayout, ConcatStaysBlockedOnlyOverWholeBlocks) {
  for (int64_t second : {8, 4}) {
    ModelBuilder b("concat", 13);
    b.input("x", DType::Float32, Shape{1, 4, 6, 6});
    conv(b, "x", "a", 4, 8, 1);
    conv(b, "x", "c", 4, second, 3);
    b.node("Concat", {"a", "c"}, {"y"}).attr("axis", int64_t{1});
    b.output("y", DType::Float32, Shape{});
    Graph g = prepared_graph(b);
    EXPECT_EQ(lay_out_and_compare(g, 8), 2);
    const std::vector<std::string> ops = op_types(g);
    EXPECT_EQ(ops.back(), second == 8 ? "ReorderFromBlocked" : "Concat") << second;
  }
}

// A channel Slice of a blocked tensor (a merged conv split back, frontend/subst) stays on the blocks
// when it starts at a block and ends at one or at the last channel (the part's padded channels are
// the whole's); one that starts inside a block reads NCHW. 20 channels in blocks of 8: [0, 8) and
// [8, 20) stay blocked, [4, 12) does not.
TEST(BlockLayout, ChannelSlicesFromABlockStartStayBlocked) {
  for (const auto& [begin, end, blocked] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {0, 8, true}, {8, 20, true}, {4, 12, false}}) {
    ModelBuilder b("split", 13);
    b.input("x", DType::Float32, Shape{1, 4, 6, 6});
    conv(b, "x", "a", 4, 20, 1);
    b.node("Relu", {"a"}, {"r"});
    b.initializer("starts", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{begin}));
    b.initializer("ends", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{end}));
    b.initializer("axes", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{1}));
    b.node("Slice", {"r", "starts", "ends", "axes"}, {"part"});
    conv(b, "part", "y", end - begin, 8, 3);
    b.output("y", DType::Float32, Shape{});
    Graph g = prepared_graph(b);
    EXPECT_EQ(lay_out_and_compare(g, 8), 2) << begin << ".." << end;
    const std::vector<std::string> ops = op_types(g);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "ReorderFromBlocked"), blocked ? 1 : 2) << begin << ".." << end;
  }
}

// The same compiled for this host (blocks of 16 or 8): the tail [16, 40) of 40 channels ends in the
// whole's padded block, whose channels hold sigmoid(0) = 0.5, not 0; the reading conv ignores them.
TEST(BlockLayout, ATailSliceEndingInAPaddedBlockCompilesToTheReference) {
  ModelBuilder b("tail", 13);
  b.input("x", DType::Float32, Shape{1, 8, 6, 6});
  conv(b, "x", "a", 8, 40, 1);
  b.node("Sigmoid", {"a"}, {"s"});
  b.initializer("starts", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{16}));
  b.initializer("ends", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{40}));
  b.initializer("axes", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{1}));
  b.node("Slice", {"s", "starts", "ends", "axes"}, {"part"});
  conv(b, "part", "y", 24, 16, 3);
  b.output("y", DType::Float32, Shape{1, 16, 6, 6});
  const testing::TempDir dir;
  const testing::HostPackage pkg(b, dir);
  const std::map<std::string, Tensor> in = {{"x", random_weights({1, 8, 6, 6}, 9)}};
  testing::expect_same_outputs(run_reference(pkg.graph(), in), pkg.run(in));
}

// A per-channel divisor is padded with ones, not zeros: its padded channels divide the conv's zeros,
// and 0 / 0 would be a NaN that the next conv's zero weights do not cancel (NaN x 0 is NaN). 12
// channels in blocks of 8 leave 4 padded.
TEST(BlockLayout, APerChannelDivisorsPaddedChannelsDivideByOne) {
  ModelBuilder b("div", 13);
  b.input("x", DType::Float32, Shape{1, 4, 6, 6});
  conv(b, "x", "c", 4, 12, 1);
  b.initializer("k", random_weights({1, 12, 1, 1}, 7));
  b.node("Div", {"c", "k"}, {"d"});
  conv(b, "d", "y", 12, 8, 3);
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 8), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Div", "ConvBlocked", "ReorderFromBlocked"}));
  const Tensor& divisor = *g.value(g.nodes[2].inputs[1]).constant;
  EXPECT_EQ(divisor.get_double(12), 1.0);  // the first padded channel
}

// A ConvTranspose split into a Conv per phase (dcgan's layers): DepthToSpace (DCR) of their blocked
// Concat moves whole blocks, so the region stays blocked up to the next conv. CRD, or output channels
// that do not fill whole blocks, leave it NCHW.
TEST(BlockLayout, DepthToSpaceOfWholeBlocksStaysBlocked) {
  for (const auto& [mode, out_channels, blocked] : std::vector<std::tuple<std::string, int64_t, bool>>{
           {"DCR", 8, true}, {"CRD", 8, false}, {"DCR", 4, false}}) {
    ModelBuilder b("d2s", 13);
    b.input("x", DType::Float32, Shape{1, 4, 5, 5});
    conv(b, "x", "p", 4, out_channels * 4, 1);
    b.node("DepthToSpace", {"p"}, {"d"}).attr("blocksize", int64_t{2}).attr("mode", mode);
    b.node("Relu", {"d"}, {"r"});
    conv(b, "r", "y", out_channels, 8, 3);
    b.output("y", DType::Float32, Shape{});
    Graph g = prepared_graph(b);
    EXPECT_EQ(lay_out_and_compare(g, 8), 2) << mode << out_channels;
    const std::vector<std::string> ops = op_types(g);
    const size_t reorders = static_cast<size_t>(std::count(ops.begin(), ops.end(), "ReorderFromBlocked"));
    EXPECT_EQ(reorders, blocked ? 1u : 2u) << mode << out_channels;  // the output's, and one before the interleave
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Transpose"), blocked ? 1 : 0) << mode << out_channels;
  }
}

// Resize of the planes stays blocked (the block axis at scale 1), by scales or by sizes and in every
// mode; one that crops (tf_crop_and_resize) or touches the channels reads NCHW.
TEST(BlockLayout, ResizeOfThePlanesStaysBlocked) {
  struct Case {
    std::string mode, transform;
    std::vector<double> scales;  // empty: sizes
    bool blocked;
  };
  for (const Case& c : std::vector<Case>{{"nearest", "asymmetric", {1, 1, 2, 2}, true},
                                         {"linear", "half_pixel", {1, 1, 1.5, 2}, true},
                                         {"cubic", "align_corners", {}, true},
                                         {"nearest", "half_pixel", {1, 2, 2, 2}, false},
                                         {"linear", "tf_crop_and_resize", {1, 1, 2, 2}, false}}) {
    SCOPED_TRACE(c.mode + " " + c.transform);
    ModelBuilder b("resize", 13);
    b.input("x", DType::Float32, Shape{1, 4, 5, 5});
    conv(b, "x", "p", 4, 20, 1);  // 20 channels: the second block half padding
    b.initializer("roi", Tensor::from_doubles(DType::Float32, {8}, std::vector<double>{0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8}));
    if (c.scales.empty()) {
      b.initializer("sizes", Tensor::from_ints(DType::Int64, {4}, std::vector<int64_t>{1, 20, 7, 9}));
      b.node("Resize", {"p", "roi", "", "sizes"}, {"r"}).attr("mode", c.mode).attr("coordinate_transformation_mode", c.transform);
    } else {
      b.initializer("scales", Tensor::from_doubles(DType::Float32, {4}, c.scales));
      b.node("Resize", {"p", "roi", "scales"}, {"r"}).attr("mode", c.mode).attr("coordinate_transformation_mode", c.transform);
    }
    b.node("Relu", {"r"}, {"y"});
    b.output("y", DType::Float32, Shape{});
    Graph g = prepared_graph(b);
    EXPECT_EQ(lay_out_and_compare(g, 16), 1);
    const std::vector<std::string> ops = op_types(g);
    const auto resize = std::find(ops.begin(), ops.end(), "Resize");
    ASSERT_NE(resize, ops.end());
    const auto reorder = std::find(ops.begin(), ops.end(), "ReorderFromBlocked");
    EXPECT_EQ(reorder > resize, c.blocked) << "the reorder out of the blocks comes after the Resize when it stays blocked";
  }
}

// A MobileNet block: expand (1x1), depthwise 3x3 stride 2, project, all blocked; the depthwise conv
// keeps its input's blocks (20 channels: 2 blocks of 16, the second padded).
TEST(BlockLayout, DepthwiseConvsStayBlocked) {
  ModelBuilder b("mobile", 13);
  b.input("x", DType::Float32, Shape{1, 8, 9, 9});
  b.initializer("e.w", random_weights({20, 8, 1, 1}, 1));
  b.initializer("d.w", random_weights({20, 1, 3, 3}, 2));
  b.initializer("d.b", random_weights({20}, 3));
  b.initializer("p.w", random_weights({8, 20, 1, 1}, 4));
  b.node("Conv", {"x", "e.w"}, {"e"});
  b.node("Relu", {"e"}, {"er"});
  b.node("Conv", {"er", "d.w", "d.b"}, {"d"})
      .attr("group", int64_t{20})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1})
      .attr("strides", std::vector<int64_t>{2, 2});
  b.node("Relu", {"d"}, {"dr"});
  b.node("Conv", {"dr", "p.w"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 16), 3);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Relu", "DepthwiseConvBlocked", "Relu",
                                                   "ConvBlocked", "ReorderFromBlocked"}));
  EXPECT_EQ(g.value(g.nodes[3].outputs[0]).shape, (Shape{1, 2, 5, 5, 16}));
}

// A grouped conv whose groups fill whole blocks on both sides runs on the blocks: output block o
// reads its own group's input blocks (ResNeXt's 16- and 32-channel groups at block 16). Here blocks
// of 4: groups of 8 (two blocks in, two out), then groups of 4 (one block each) with a bias and a
// stride; groups of 2 do not fill a block and stay NCHW between reorders.
TEST(BlockLayout, GroupedConvsWhoseGroupsFillBlocksAreBlocked) {
  ModelBuilder b("resnext", 13);
  b.input("x", DType::Float32, Shape{1, 16, 7, 7});
  b.initializer("a.w", random_weights({16, 8, 3, 3}, 1));
  b.node("Conv", {"x", "a.w"}, {"a"}).attr("group", int64_t{2}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"a"}, {"ar"});
  b.initializer("c.w", random_weights({16, 4, 3, 3}, 2));
  b.initializer("c.b", random_weights({16}, 3));
  b.node("Conv", {"ar", "c.w", "c.b"}, {"c"})
      .attr("group", int64_t{4})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1})
      .attr("strides", std::vector<int64_t>{2, 2});
  b.initializer("n.w", random_weights({16, 2, 1, 1}, 4));
  b.node("Conv", {"c", "n.w"}, {"y"}).attr("group", int64_t{8});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 4), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Relu", "ConvBlocked",
                                                   "ReorderFromBlocked", "Conv"}));
  EXPECT_EQ(g.nodes[1].attr_int("group", 1), 2);
  EXPECT_EQ(g.value(g.nodes[1].inputs[1]).shape, (Shape{4, 2, 3, 3, 4, 4}));  // 2 input blocks a group
  EXPECT_EQ(g.nodes[3].attr_int("group", 1), 4);
  EXPECT_EQ(g.value(g.nodes[3].inputs[1]).shape, (Shape{4, 1, 3, 3, 4, 4}));
  EXPECT_EQ(g.value(g.nodes[3].outputs[0]).shape, (Shape{1, 4, 4, 4, 4}));

  // A group count the blocks do not match is refused by name.
  g.nodes[3].attrs["group"] = AttrValue(int64_t{3});
  try {
    infer_shapes(g);
    ADD_FAILURE() << "a ConvBlocked of 3 groups over 4 blocks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Co/bo x Ci/(3 bi)"), std::string::npos) << e.what();
  }
}

// What stays NCHW: grouped convs whose groups do not fill blocks and are not depthwise, convs whose
// weights are computed at run time; and block 1 (no vectors).
// A 3-D residual block (resnet3d18's shape of layer: strided stem with unequal kernel extents, a
// 1x1x1 strided shortcut, per-channel scale, Add, Relu, global pooling) is blocked like a 2-D one:
// N x C/b x D x H x W x b, weights Co/bo x Ci/bi x KD x KH x KW x bi x bo; a 1-D conv too.
TEST(BlockLayout, ThreeAndOneDimensionalConvsAreBlocked) {
  ModelBuilder b("video", 13);
  b.input("x", DType::Float32, Shape{1, 3, 4, 9, 9});
  b.initializer("stem.w", random_weights({12, 3, 3, 5, 5}, 1));
  b.node("Conv", {"x", "stem.w"}, {"stem"})
      .attr("pads", std::vector<int64_t>{1, 2, 2, 1, 2, 2})
      .attr("strides", std::vector<int64_t>{1, 2, 2});
  b.node("Relu", {"stem"}, {"r"});
  b.initializer("c.w", random_weights({12, 12, 3, 3, 3}, 3));
  b.initializer("c.b", random_weights({12}, 4));
  b.node("Conv", {"r", "c.w", "c.b"}, {"c"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1, 1, 1});
  b.initializer("scale", random_weights({12, 1, 1, 1}, 5));
  b.node("Mul", {"c", "scale"}, {"m"});
  b.initializer("down.w", random_weights({12, 12, 1, 1, 1}, 6));
  b.node("Conv", {"r", "down.w"}, {"down"});
  b.node("Add", {"m", "down"}, {"sum"});
  b.node("GlobalAveragePool", {"sum"}, {"gap"});
  b.node("Flatten", {"gap"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(lay_out_and_compare(g, 8), 3);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "Relu", "ConvBlocked", "Mul",
                                                   "ConvBlocked", "Add", "ReduceMean", "ReorderFromBlocked", "Flatten"}));
  EXPECT_EQ(g.value(g.nodes[1].outputs[0]).shape, (Shape{1, 2, 4, 5, 5, 8}));
  EXPECT_EQ(g.value(g.nodes[1].inputs[1]).shape, (Shape{2, 3, 3, 5, 5, 1, 8}));  // the padded stem's 3 blocks of 1
  EXPECT_EQ(g.value(g.nodes[4].inputs[1]).shape, (Shape{1, 2, 1, 1, 1, 8}));  // the scale, per channel
  EXPECT_EQ(g.value(g.nodes[7].outputs[0]).shape, (Shape{1, 2, 1, 1, 1, 8}));

  ModelBuilder a("audio", 13);
  a.input("x", DType::Float32, Shape{2, 5, 11});
  a.initializer("w", random_weights({6, 5, 3}, 7));
  a.node("Conv", {"x", "w"}, {"y"}).attr("pads", std::vector<int64_t>{1, 0}).attr("strides", std::vector<int64_t>{2});
  a.output("y", DType::Float32, Shape{});
  Graph h = prepared_graph(a);
  EXPECT_EQ(lay_out_and_compare(h, 4), 1);
  EXPECT_EQ(op_types(h), (std::vector<std::string>{"ReorderToBlocked", "ConvBlocked", "ReorderFromBlocked"}));
}

TEST(BlockLayout, LeavesGroupedAndRunTimeWeightConvsAndScalarTargetsAlone) {
  ModelBuilder b("alone", 13);
  b.input("x", DType::Float32, Shape{1, 4, 6, 6});
  b.input("w", DType::Float32, Shape{4, 4, 3, 3});
  b.initializer("dw", random_weights({4, 2, 3, 3}, 1));
  b.node("Conv", {"x", "dw"}, {"d"}).attr("group", int64_t{2});
  b.node("Conv", {"d", "w"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(block_layout(g, 16), 0);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "Conv"}));

  ModelBuilder v("depthwise3d", 13);  // DepthwiseConvBlocked is 2-D only
  v.input("x", DType::Float32, Shape{1, 4, 3, 6, 6});
  v.initializer("w", random_weights({4, 1, 3, 3, 3}, 1));
  v.node("Conv", {"x", "w"}, {"y"}).attr("group", int64_t{4});
  v.output("y", DType::Float32, Shape{});
  Graph dw = prepared_graph(v);
  EXPECT_EQ(block_layout(dw, 16), 0);

  ModelBuilder c("scalar", 13);
  c.input("x", DType::Float32, Shape{1, 4, 6, 6});
  conv(c, "x", "y", 4, 4, 1);
  c.output("y", DType::Float32, Shape{});
  Graph h = prepared_graph(c);
  EXPECT_EQ(block_layout(h, 1), 0);
  EXPECT_EQ(op_types(h), (std::vector<std::string>{"Conv"}));
  EXPECT_EQ(float_block_for(512), 16);
  EXPECT_EQ(float_block_for(256), 8);
  EXPECT_EQ(float_block_for(128), 4);
}

}  // namespace
}  // namespace kiln
