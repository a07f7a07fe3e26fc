// Sketches of the workloads Ansor's paper shows, printed: the rules' structure, not tile sizes.
#include <gtest/gtest.h>

#include <set>

#include "scheduler/sketch/sketch_rule.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using namespace state;
using state::testing::matmul;


std::vector<State> all_sketches_of(const std::vector<te::TensorRef>& outs) {
  State s(std::make_shared<te::ComputeDAG>(te::make_dag(outs)));
  return sketch::generate_sketches(s, sketch::SearchParams{});
}

bool packs(const State& s) { return print_steps(s).find(".cache_read(\"pack\"") != std::string::npos; }

// Ansor's sketches: those without kiln's packing copy (tested on its own below).
std::vector<State> sketches_of(const std::vector<te::TensorRef>& outs) {
  std::vector<State> out;
  for (State& s : all_sketches_of(outs))
    if (!packs(s)) out.push_back(std::move(s));
  return out;
}

std::string all(const std::vector<State>& ss) {
  std::string out;
  for (const State& s : ss) out += "---\n" + print_steps(s) + print_state(s);
  return out;
}

TEST(Sketch, MatmulGetsCacheWriteAndPlainTiling) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  std::vector<State> ss = sketches_of({matmul(a, b)});
  ASSERT_EQ(ss.size(), 3u) << all(ss);
  // Ansor's matmul on CPU: a local accumulator tiled SSRSRS and computed at the output's level-1 or
  // level-2 tile, or the output tiled SSRSRS in place.
  int cached = 0, plain = 0;
  for (const State& s : ss) {
    const std::string steps = print_steps(s);
    if (steps.rfind("C.cache_write(\"local\")\n", 0) == 0) {
      ++cached;
      EXPECT_NE(steps.find("C.local.reorder(i0.0, i1.0, i0.1, i1.1, r0.0, i0.2, i1.2, r0.1, i0.3, i1.3)"), std::string::npos);
      EXPECT_TRUE(steps.find("C.local.compute_at(C, ax1.0)") != std::string::npos ||
                  steps.find("C.local.compute_at(C, ax1.1)") != std::string::npos)
          << steps;
    } else {
      ++plain;
      EXPECT_NE(steps.find("C.reorder(i0.0, i1.0, i0.1, i1.1, r0.0, i0.2, i1.2, r0.1, i0.3, i1.3)"), std::string::npos);
    }
  }
  EXPECT_EQ(cached, 2);
  EXPECT_EQ(plain, 1);
}

TEST(Sketch, ARunTimeRightHandOperandGetsPackingVariantsAndAWeightNone) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  std::vector<State> ss = all_sketches_of({matmul(a, b)});
  ASSERT_EQ(ss.size(), 6u) << all(ss);
  int packing = 0;
  for (const State& s : ss) {
    if (!packs(s)) continue;
    ++packing;
    // B (read at [k, j]: j is the vector axis, i not in it) is copied for the stage that C's tiles
    // accumulate in (C itself or C.local); A never is.
    const std::string steps = print_steps(s);
    EXPECT_NE(steps.find("B.cache_read(\"pack\", [C"), std::string::npos) << steps;
    EXPECT_EQ(steps.find("A.cache_read"), std::string::npos) << steps;
  }
  EXPECT_EQ(packing, 3) << "each of Ansor's three matmul sketches, with and without the copy";
  // A constant weight is not copied: its layout is rewritten when compiling.
  auto w = te::placeholder("W", DType::Float32, {512, 512}, std::make_shared<Tensor>(DType::Float32, Shape{512, 512}));
  for (const State& s : all_sketches_of({matmul(a, w)})) EXPECT_FALSE(packs(s)) << print_steps(s);
}

TEST(Sketch, MatmulReluFusesTheRelu) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  auto c = matmul(a, b);
  auto d = te::compute("D", "elementwise", DType::Float32, {512, 512},
                       [&](const std::vector<te::Expr>& i) { return te::max(te::at(c, i), te::float_imm(0.0)); });
  std::vector<State> ss = sketches_of({d});
  ASSERT_EQ(ss.size(), 2u) << all(ss);
  // Ansor's Figure 5, input 1: C tiled SSRSRS, the relu D tiled to follow and C computed inside it.
  const std::string tiling =
      "C.split(i0, [?, ?, ?])\n"
      "C.split(i1, [?, ?, ?])\n"
      "C.split(r0, [?])\n"
      "C.reorder(i0.0, i1.0, i0.1, i1.1, r0.0, i0.2, i1.2, r0.1, i0.3, i1.3)\n";
  std::set<std::string> got = {print_steps(ss[0]), print_steps(ss[1])};
  std::set<std::string> want = {
      tiling + "D.follow_split(i0, step 0, [?])\nD.follow_split(i1, step 1, [?])\n"
               "D.reorder(i0.0, i1.0, i0.1, i1.1)\nC.compute_at(D, i1.0)\n",
      tiling + "D.follow_split(i0, step 0, [?, ?])\nD.follow_split(i1, step 1, [?, ?])\n"
               "D.reorder(i0.0, i1.0, i0.1, i1.1, i0.2, i1.2)\nC.compute_at(D, i1.1)\n"};
  EXPECT_EQ(got, want) << all(ss);
}

// SiLU, D = C * sigmoid(C): the sigmoid has an exp (Ansor would keep it a stage, so C had two readers
// and nothing fused) but it is read once by its only reader, so it is inlined and the Mul follows C's
// tiles exactly as the Relu above does.
TEST(Sketch, MatmulSiluInlinesTheSigmoidAndFusesTheMul) {
  auto a = te::placeholder("A", DType::Float32, {512, 512});
  auto b = te::placeholder("B", DType::Float32, {512, 512});
  auto c = matmul(a, b);
  auto sig = te::compute("S", "elementwise", DType::Float32, {512, 512},
                         [&](const std::vector<te::Expr>& i) { return te::unary(te::ExprOp::Sigmoid, te::at(c, i)); });
  auto d = te::compute("D", "elementwise", DType::Float32, {512, 512},
                       [&](const std::vector<te::Expr>& i) { return te::at(c, i) * te::at(sig, i); });
  std::vector<State> ss = sketches_of({d});
  ASSERT_EQ(ss.size(), 2u) << all(ss);
  for (const State& s : ss) {
    const std::string steps = print_steps(s);
    EXPECT_EQ(steps.rfind("S.compute_inline()\n", 0), 0u) << steps;
    EXPECT_NE(steps.find("C.compute_at(D, "), std::string::npos) << steps;
  }
}

TEST(Sketch, Conv2dBiasReluInlinesTheBiasAndFusesTheRelu) {
  auto x = te::placeholder("X", DType::Float32, {1, 8, 14, 14});
  auto w = te::placeholder("W", DType::Float32, {16, 8, 3, 3});
  auto bias = te::placeholder("bias", DType::Float32, {16});
  auto pad = te::compute("pad", "injective", DType::Float32, {1, 8, 16, 16}, [&](const std::vector<te::Expr>& i) {
    te::Expr inside = i[2] >= te::int_imm(1) && i[2] < te::int_imm(15) && i[3] >= te::int_imm(1) && i[3] < te::int_imm(15);
    return te::select(inside, te::at(x, {i[0], i[1], i[2] - 1, i[3] - 1}), te::float_imm(0.0));
  });
  auto conv = te::reduce("conv", "conv", DType::Float32, {1, 16, 14, 14}, te::Reducer::Sum, {8, 3, 3},
                         [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                           return te::at(pad, {i[0], r[0], i[2] + r[1], i[3] + r[2]}) * te::at(w, {i[1], r[0], r[1], r[2]});
                         });
  auto biased = te::compute("biased", "broadcast", DType::Float32, {1, 16, 14, 14},
                            [&](const std::vector<te::Expr>& i) { return te::at(conv, i) + te::at(bias, {i[1]}); });
  auto relu = te::compute("relu", "elementwise", DType::Float32, {1, 16, 14, 14},
                          [&](const std::vector<te::Expr>& i) { return te::max(te::at(biased, i), te::float_imm(0.0)); });
  std::vector<State> ss = sketches_of({relu});
  ASSERT_EQ(ss.size(), 2u) << all(ss);
  for (const State& s : ss) {
    const std::string steps = print_steps(s);
    EXPECT_EQ(steps.rfind("biased.compute_inline()\n", 0), 0u) << steps;
    EXPECT_NE(steps.find("conv.reorder(i0, i1.0, i2.0, i3.0, i1.1, i2.1, i3.1, r0.0, r1.0, r2.0, i1.2, i2.2, i3.2, "
                         "r0.1, r1.1, r2.1, i1.3, i2.3, i3.3)"),
              std::string::npos)
        << steps;
    EXPECT_NE(steps.find("conv.compute_at(relu, "), std::string::npos) << steps;
    EXPECT_EQ(steps.find("pad."), std::string::npos) << "padding is left to the init rules: " << steps;
  }
  std::cout << all(ss);
}

}  // namespace
}  // namespace kiln
