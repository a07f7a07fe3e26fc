#include "frontend/passes/conv_transpose_to_conv.h"

#include <gtest/gtest.h>

#include <functional>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::op_types;
using testing::prepared_graph;
using testing::random_weights;

// A model of one ConvTranspose of x (shape x_shape) with weights of w_shape in `group` groups, a bias
// when asked, and the attributes `set` gives it.
Graph deconv_model(const Shape& x_shape, const Shape& w_shape, int64_t group, bool bias,
                   const std::function<void(ModelBuilder::NodeRef&)>& set) {
  ModelBuilder b("deconv", 13);
  b.input("x", DType::Float32, x_shape);
  b.initializer("w", random_weights(w_shape, 1));
  std::vector<std::string> ins{"x", "w"};
  if (bias) {
    b.initializer("b", random_weights({w_shape[1] * group}, 2));
    ins.push_back("b");
  }
  ModelBuilder::NodeRef n = b.node("ConvTranspose", ins, {"y"});
  if (group != 1) n.attr("group", group);
  set(n);
  b.output("y", DType::Float32, Shape{});
  return prepared_graph(b);
}

// Rewrites `g` and checks that it computes what the ConvTranspose did, to float32 rounding.
int rewrite_and_compare(Graph& g) { return testing::rewrite_and_compare(g, conv_transpose_to_conv); }

using Ints = std::vector<int64_t>;

// dcgan's last layer: kernel 4, stride 2, pads 1, on 32x32. The phases' rows overlap the pads by one,
// so the interleaved grid is cropped; the shared grid (33 rows per phase for 32) costs 6% more work,
// too little for a Conv per phase.
TEST(ConvTransposeToConv, DcganLayerBecomesConvDepthToSpaceAndSlice) {
  Graph g = deconv_model({1, 8, 32, 32}, {8, 5, 4, 4}, 1, true, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{2, 2}).attr("pads", Ints{1, 1, 1, 1});
  });
  EXPECT_EQ(rewrite_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "DepthToSpace", "Slice"}));
  const Shape& w = g.value(g.nodes[0].inputs[1]).shape;
  EXPECT_EQ(w, (Shape{20, 8, 2, 2}));  // 5 channels x 4 phases, a 2 x 2 kernel per phase
  EXPECT_FALSE(g.has_value("w"));
}

// dcgan's second layer, 4x4 -> 8x8: a shared grid would compute 5x5 rows per phase for the 4x4 each
// keeps (1.56x the work), so each phase gets its own Conv with its own pads, and DepthToSpace (DCR)
// interleaves their Concat.
TEST(ConvTransposeToConv, SmallDcganLayerSplitsIntoAConvPerPhase) {
  Graph g = deconv_model({1, 8, 4, 4}, {8, 5, 4, 4}, 1, true, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{2, 2}).attr("pads", Ints{1, 1, 1, 1});
  });
  EXPECT_EQ(rewrite_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "Conv", "Conv", "Conv", "Concat", "DepthToSpace"}));
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(g.value(g.nodes[k].inputs[1]).shape, (Shape{5, 8, 2, 2})) << k;
    EXPECT_EQ(g.value(g.nodes[k].outputs[0]).shape, (Shape{1, 5, 4, 4})) << k;  // exactly the rows kept
  }
  EXPECT_EQ(g.nodes[5].attr_string("mode", ""), "DCR");
}

// Stride 3 with a 5-tap kernel: the three phases along an axis have 2, 1 and 2 taps, so the Convs of
// the exact split have different kernels; groups and a bias as well.
TEST(ConvTransposeToConv, ExactSplitWithUnequalTapsAndGroups) {
  Graph g = deconv_model({1, 4, 4, 4}, {4, 3, 5, 5}, 2, true, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{3, 3}).attr("pads", Ints{1, 1, 1, 1});
  });
  EXPECT_EQ(rewrite_and_compare(g), 1);
  ASSERT_EQ(g.nodes.size(), 11u);  // 9 Convs, Concat, DepthToSpace
  EXPECT_EQ(g.value(g.nodes[0].inputs[1]).shape, (Shape{6, 2, 2, 2}));
  EXPECT_EQ(g.value(g.nodes[1].inputs[1]).shape, (Shape{6, 2, 2, 1}));
  EXPECT_EQ(g.value(g.nodes[4].inputs[1]).shape, (Shape{6, 2, 1, 1}));
}

// Kernel 2, stride 2, no pads: the phases tile the output exactly, so nothing is cropped.
TEST(ConvTransposeToConv, KernelEqualToStrideNeedsNoCrop) {
  Graph g = deconv_model({2, 3, 5, 5}, {3, 4, 2, 2}, 1, false, [](ModelBuilder::NodeRef& n) { n.attr("strides", Ints{2, 2}); });
  EXPECT_EQ(rewrite_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "DepthToSpace"}));
}

// A kernel that is not a multiple of the stride (some phases have fewer taps: zero weights),
// output_padding, asymmetric pads and groups.
TEST(ConvTransposeToConv, OddKernelsOutputPaddingAsymmetricPadsAndGroups) {
  Graph g = deconv_model({1, 4, 5, 6}, {4, 3, 3, 5}, 2, true, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{3, 3}).attr("pads", Ints{0, 2, 1, 3}).attr("output_padding", Ints{2, 1});
  });
  EXPECT_EQ(rewrite_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "DepthToSpace", "Slice"}));
}

// auto_pad SAME_UPPER and an explicit output_shape resolve to pads as the spec says; an output_shape
// larger than the full extent gives negative pads_begin (the output grows), which the Conv's pads cover.
TEST(ConvTransposeToConv, AutoPadAndOutputShape) {
  Graph same = deconv_model({1, 2, 3, 3}, {2, 2, 3, 3}, 1, false, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{2, 2}).attr("auto_pad", std::string("SAME_UPPER"));
  });
  EXPECT_EQ(rewrite_and_compare(same), 1);
  Graph shaped = deconv_model({1, 2, 3, 3}, {2, 2, 3, 3}, 1, true, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{2, 2}).attr("output_shape", Ints{10, 9});
  });
  EXPECT_EQ(rewrite_and_compare(shaped), 1);
}

// Stride 1 on any rank is a Conv with the kernel flipped: a 3-D grouped one here.
TEST(ConvTransposeToConv, StrideOneIsAFlippedConvOnAnyRank) {
  Graph g = deconv_model({1, 4, 3, 4, 5}, {4, 2, 3, 2, 3}, 2, true, [](ModelBuilder::NodeRef& n) {
    n.attr("pads", Ints{1, 0, 2, 1, 1, 0});
  });
  EXPECT_EQ(rewrite_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv"}));
}

// What keeps its ConvTranspose: dilation, strides that differ by axis, a strided 1-D one, weights
// that are not constants.
TEST(ConvTransposeToConv, LeavesWhatItCannotRewrite) {
  Graph dilated = deconv_model({1, 2, 4, 4}, {2, 2, 3, 3}, 1, false, [](ModelBuilder::NodeRef& n) {
    n.attr("strides", Ints{2, 2}).attr("dilations", Ints{2, 2});
  });
  Graph uneven = deconv_model({1, 2, 4, 4}, {2, 2, 3, 3}, 1, false, [](ModelBuilder::NodeRef& n) { n.attr("strides", Ints{2, 1}); });
  Graph one_d = deconv_model({1, 2, 4}, {2, 2, 3}, 1, false, [](ModelBuilder::NodeRef& n) { n.attr("strides", Ints{2}); });
  for (Graph* g : {&dilated, &uneven, &one_d}) {
    EXPECT_EQ(conv_transpose_to_conv(*g), 0);
    EXPECT_EQ(op_types(*g), (std::vector<std::string>{"ConvTranspose"}));
  }
  ModelBuilder b("runtime_weights", 13);
  b.input("x", DType::Float32, Shape{1, 2, 4, 4});
  b.input("w", DType::Float32, Shape{2, 2, 3, 3});
  b.node("ConvTranspose", {"x", "w"}, {"y"}).attr("strides", Ints{2, 2});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(conv_transpose_to_conv(g), 0);
}

}  // namespace
}  // namespace kiln
