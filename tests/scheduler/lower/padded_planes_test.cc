// Padded planes (scheduler/lower/padded_planes.h): which pad stages the default schedule pads plane by
// plane inside their reader, what the lowered nest looks like, and that the JIT-compiled result equals
// the tensor-expression evaluator's (which reads the pad stage as written).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "backends/llvm/jit.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/padded_planes.h"
#include "scheduler/te/te_eval.h"

namespace kiln {
namespace {

using te::Expr;
using te::int_imm;

// x[n, c, h, w] padded by `pad` on every side of h and w with `fill`, as nn_conv_lowering.cc's
// padded_with writes it (its tag "pad" is what the plan looks for).
te::TensorRef padded(const te::TensorRef& x, int64_t pad, double fill) {
  Shape s = x->shape;
  s[2] += 2 * pad;
  s[3] += 2 * pad;
  return te::compute("x.pad", "pad", x->dtype, s, [&](const std::vector<Expr>& i) {
    Expr h = i[2] - int_imm(pad), w = i[3] - int_imm(pad);
    Expr inside = h >= int_imm(0) && h < int_imm(x->shape[2]) && w >= int_imm(0) && w < int_imm(x->shape[3]);
    return te::select(inside, te::at(x, {i[0], i[1], h, w}), te::const_of(x->dtype, fill));
  });
}

// A depthwise k x k conv over channels `c` of an h x h image, padded to keep its size; the channel
// index is floordiv(m, 1) + r0 with r0 in [0, 1), as a grouped conv with one channel per group reads it.
struct Depthwise {
  te::TensorRef x, w, pad, out;
  Depthwise(int64_t c, int64_t h, int64_t k) {
    x = te::placeholder("x", DType::Float32, {1, c, h, h});
    w = te::placeholder("w", DType::Float32, {c, 1, k, k});
    pad = padded(x, k / 2, 0);
    out = te::reduce("conv", "conv", DType::Float32, {1, c, h, h}, te::Reducer::Sum, {1, k, k},
                     [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                       return te::at(pad, {o[0], te::floordiv(o[1], int_imm(1)) + r[0], o[2] + r[1], o[3] + r[2]}) *
                              te::at(w, {o[1] + r[0], int_imm(0), r[1], r[2]});
                     });
  }
};

// Max abs difference between lower_dag's JIT-compiled function and the evaluator on random inputs.
double max_error(const te::ComputeDAG& dag, const lower::LoweredFunc& f) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::map<const te::TensorNode*, Tensor> inputs;
  std::vector<std::vector<float>> storage;
  std::vector<void*> ptrs;
  for (const lower::BufferRef& b : f.params) {
    storage.emplace_back(static_cast<size_t>(std::max<int64_t>(b->size, 1)), std::nanf(""));
    ptrs.push_back(storage.back().data());
  }
  for (size_t i = 0; i < dag.placeholders.size(); ++i) {
    Tensor t(DType::Float32, dag.placeholders[i]->shape);
    for (size_t e = 0; e < storage[i].size(); ++e) {
      storage[i][e] = dist(rng);
      t.set_double(static_cast<int64_t>(e), storage[i][e]);
    }
    inputs[dag.placeholders[i].get()] = std::move(t);
  }
  llvm_backend::JitFunction(f).run(ptrs);
  const std::vector<Tensor> want = te::evaluate(dag, inputs);
  double err = 0;
  for (size_t o = 0; o < dag.outputs.size(); ++o) {
    size_t p = 0;
    while (p < f.params.size() && f.params[p]->name != dag.outputs[o]->name) ++p;
    if (p == f.params.size()) return INFINITY;
    for (int64_t e = 0; e < num_elements(dag.outputs[o]->shape); ++e)
      err = std::max(err, std::abs(static_cast<double>(storage[p][static_cast<size_t>(e)]) - want[o].get_double(e)));
  }
  return err;
}

bool has_param(const lower::LoweredFunc& f, const std::string& name) {
  for (const lower::BufferRef& b : f.params)
    if (b->name == name) return true;
  return false;
}

// A depthwise conv pads each channel's plane at the top of its channel loop (the parallel one): the
// pad stage has no buffer, the plane is stored as zeros around the input with no select, and the
// numbers are the evaluator's.
TEST(PaddedPlanes, ADepthwiseConvPadsEachChannelInsideItsLoop) {
  Depthwise d(8, 20, 3);
  const te::ComputeDAG dag = te::make_dag({d.out});
  const lower::PaddedPlanePlan plan = lower::plan_padded_planes(dag, {});
  ASSERT_EQ(plan.by_reader.size(), 1u);
  EXPECT_EQ(plan.by_reader.begin()->second.depth, 2u);  // batch and channel: the plane is 22 x 22
  EXPECT_TRUE(plan.planes.count(d.pad.get()));
  lower::ScheduleParams threads;  // a parallel loop however small the stage
  threads.min_parallel_work = 1;
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", threads);
  const std::string text = lower::print_func(f);
  EXPECT_FALSE(has_param(f, "x.pad")) << text;
  EXPECT_NE(text.find("allocate x.pad.plane: float32[484]"), std::string::npos) << text;
  EXPECT_EQ(text.find("select"), std::string::npos) << text;
  EXPECT_LT(text.find("parallel for i1"), text.find("allocate x.pad.plane")) << text;
  EXPECT_LT(max_error(dag, f), 1e-5) << text;
}

// A pad stage that is no box of input inside a constant border (here each element is two taps,
// as an int8 plane of byte quads packs four) is still split where its row tests change value: the
// rows above and below the input are stored without a test (DS-CNN's depthwise convs on the M4:
// bench/RESULTS.md).
TEST(PaddedPlanes, APlaneOfPackedTapsIsSplitWhereItsRowTestsChange) {
  const int64_t c = 4, h = 9;
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, c, h, h});
  te::TensorRef pad = te::compute("x.pad", "pad", DType::Float32, {1, c, h + 2, h + 2}, [&](const std::vector<Expr>& i) {
    auto at = [&](const Expr& y, const Expr& col) {
      Expr inside = y >= int_imm(0) && y < int_imm(h) && col >= int_imm(0) && col < int_imm(h);
      return te::select(inside, te::at(x, {i[0], i[1], y, col}), te::const_of(DType::Float32, 0));
    };
    return at(i[2] - int_imm(1), i[3] - int_imm(1)) + at(i[2] - int_imm(1), i[3]);
  });
  te::TensorRef w = te::placeholder("w", DType::Float32, {c, 1, 3, 3});
  te::TensorRef out = te::reduce("conv", "conv", DType::Float32, {1, c, h, h}, te::Reducer::Sum, {1, 3, 3},
                                 [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                   return te::at(pad, {o[0], te::floordiv(o[1], int_imm(1)) + r[0], o[2] + r[1], o[3] + r[2]}) *
                                          te::at(w, {o[1] + r[0], int_imm(0), r[1], r[2]});
                                 });
  const te::ComputeDAG dag = te::make_dag({out});
  ASSERT_EQ(lower::plan_padded_planes(dag, {}).by_reader.size(), 1u);
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  const std::string text = lower::print_func(f);
  std::istringstream lines(text);
  int plane_stores = 0, without_test = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("x.pad.plane[") != std::string::npos && line.find("] = ") != std::string::npos &&
        line.find("x.pad.plane[") < line.find("] = ")) {
      ++plane_stores;
      without_test += line.find("select") == std::string::npos;
    }
  EXPECT_GE(plane_stores, 3) << text;
  EXPECT_GE(without_test, 2) << text;  // the row above the input and the row below
  EXPECT_LT(max_error(dag, f), 1e-5) << text;
}

// A 5 x 5 window's 25 taps run unrolled in the register tile (so rows share their loads); a max pool's
// plane is padded with the reducer's identity rather than zeros.
TEST(PaddedPlanes, WindowTapsRunUnrolledAndAMaxPoolPadsWithItsIdentity) {
  Depthwise d(4, 16, 5);
  const te::ComputeDAG conv = te::make_dag({d.out});
  const lower::LoweredFunc cf = lower::lower_dag(conv, "k", {});
  const std::string conv_text = lower::print_func(cf);
  EXPECT_NE(conv_text.find("unrolled for r1 in 0..5"), std::string::npos) << conv_text;
  EXPECT_NE(conv_text.find("unrolled for r2 in 0..5"), std::string::npos) << conv_text;
  EXPECT_LT(max_error(conv, cf), 1e-5) << conv_text;

  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 6, 9, 9});
  te::TensorRef pad = padded(x, 1, -INFINITY);
  te::TensorRef pool = te::reduce("pool", "pool", DType::Float32, {1, 6, 5, 5}, te::Reducer::Max, {3, 3},
                                  [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                    return te::at(pad, {o[0], o[1], o[2] * int_imm(2) + r[0], o[3] * int_imm(2) + r[1]});
                                  });
  const te::ComputeDAG dag = te::make_dag({pool});
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  const std::string text = lower::print_func(f);
  EXPECT_FALSE(has_param(f, "x.pad")) << text;
  EXPECT_NE(text.find("-inf"), std::string::npos) << text;
  EXPECT_LT(max_error(dag, f), 1e-6) << text;
}

// Stages that keep the pad stage as a pass of its own: a dense conv (each output channel reads every
// input channel's plane), a plane over the stack budget, and too few channels for the parallel loop
// to be the channel loop.
TEST(PaddedPlanes, DenseConvsBigPlanesAndFewChannelsKeepTheCopy) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 8, 10, 10});
  te::TensorRef w = te::placeholder("w", DType::Float32, {8, 8, 3, 3});
  te::TensorRef pad = padded(x, 1, 0);
  te::TensorRef dense = te::reduce("conv", "conv", DType::Float32, {1, 8, 10, 10}, te::Reducer::Sum, {8, 3, 3},
                                   [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                     return te::at(pad, {o[0], r[0], o[2] + r[1], o[3] + r[2]}) * te::at(w, {o[1], r[0], r[1], r[2]});
                                   });
  EXPECT_TRUE(lower::plan_padded_planes(te::make_dag({dense}), {}).planes.empty());

  Depthwise big(8, 64, 3);  // 66 x 66 floats: 17 KiB
  EXPECT_TRUE(lower::plan_padded_planes(te::make_dag({big.out}), {}).planes.empty());
  lower::ScheduleParams roomy;
  roomy.local_plane_bytes = 32 << 10;
  EXPECT_EQ(lower::plan_padded_planes(te::make_dag({big.out}), roomy).planes.size(), 1u);

  Depthwise few(3, 20, 3);
  const te::ComputeDAG dag = te::make_dag({few.out});
  EXPECT_TRUE(lower::plan_padded_planes(dag, {}).planes.empty());
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  EXPECT_TRUE(has_param(f, "x.pad"));
  EXPECT_LT(max_error(dag, f), 1e-5) << lower::print_func(f);
}

// A pool over a whole 6 x 6 plane of each of 1024 channels (inception_v1's last pool, NCHW in its
// quantized form) vectorizes along the channels, in a main loop and tails: no one loop over them can
// hold a plane, so the pad stage is stored whole (it failed to lower, "no single loop to go in").
TEST(PaddedPlanes, AReaderWhoseChannelAxisIsSplitKeepsTheCopy) {
  te::TensorRef x = te::placeholder("x", DType::Float32, {1, 1024, 6, 6});
  te::TensorRef pad = padded(x, 1, 0);
  te::TensorRef pool = te::reduce("pool", "pool", DType::Float32, {1, 1024, 1, 1}, te::Reducer::Sum, {8, 8},
                                  [&](const std::vector<Expr>& o, const std::vector<Expr>& r) {
                                    return te::at(pad, {o[0], o[1], o[2] + r[0], o[3] + r[1]});
                                  });
  const te::ComputeDAG dag = te::make_dag({pool});
  EXPECT_TRUE(lower::plan_padded_planes(dag, {}).planes.empty());
  const lower::LoweredFunc f = lower::lower_dag(dag, "k", {});
  EXPECT_TRUE(has_param(f, "x.pad"));
  EXPECT_LT(max_error(dag, f), 1e-4) << lower::print_func(f);
}

}  // namespace
}  // namespace kiln
