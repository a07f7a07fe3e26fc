/// \file Small compute DAGs the state tests schedule (matmul, matmul + ReLU, a padded conv2d, a row
/// sum), shorthands for building steps, and a check that a state's stage computations (as cache and
/// rfactor steps rewrite them) still compute what the DAG computes.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "scheduler/state/state.h"
#include "scheduler/state/step.h"
#include "scheduler/state/steps/annotation_step.h"
#include "scheduler/state/steps/cache_steps.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/follow_split_step.h"
#include "scheduler/state/steps/fuse_step.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/reorder_step.h"
#include "scheduler/state/steps/rfactor_step.h"
#include "scheduler/state/steps/split_step.h"
#include "scheduler/state/steps/storage_align_step.h"
#include "scheduler/te/substitute.h"
#include "scheduler/te/te_eval.h"

namespace kiln::state::testing {

using DagRef = std::shared_ptr<const te::ComputeDAG>;

inline DagRef dag_of(const std::vector<te::TensorRef>& outputs) {
  return std::make_shared<const te::ComputeDAG>(te::make_dag(outputs));
}

/// C[i0, i1] = sum_r0 A[i0, r0] * B[r0, i1].
inline te::TensorRef matmul(const te::TensorRef& a, const te::TensorRef& b) {
  return te::reduce("C", "matmul", DType::Float32, {a->shape[0], b->shape[1]}, te::Reducer::Sum, {a->shape[1]},
                    [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                      return te::at(a, {i[0], r[0]}) * te::at(b, {r[0], i[1]});
                    });
}

/// Stages: A=0 (64x32), B=1 (32x48), C=2 (the matmul).
inline DagRef matmul_dag(int64_t m = 64, int64_t k = 32, int64_t n = 48) {
  auto a = te::placeholder("A", DType::Float32, {m, k});
  auto b = te::placeholder("B", DType::Float32, {k, n});
  return dag_of({matmul(a, b)});
}

/// Stages: A=0, B=1, C=2 (matmul 64x32 by 32x48), D=3 = max(C, 0).
inline DagRef matmul_relu_dag() {
  auto a = te::placeholder("A", DType::Float32, {64, 32});
  auto b = te::placeholder("B", DType::Float32, {32, 48});
  auto c = matmul(a, b);
  auto d = te::compute("D", "elementwise", DType::Float32, c->shape,
                       [&](const std::vector<te::Expr>& i) { return te::max(te::at(c, i), te::float_imm(0.0)); });
  return dag_of({d});
}

/// Stages (placeholders first): X=0 (1x3x8x8), W=1 (4x3x3x3), P=2 (X padded by 1 to 1x3x10x10), O=3 (3x3
/// conv, 1x4x8x8).
inline DagRef conv_dag() {
  auto x = te::placeholder("X", DType::Float32, {1, 3, 8, 8});
  auto p = te::compute("P", "injective", DType::Float32, {1, 3, 10, 10}, [&](const std::vector<te::Expr>& i) {
    te::Expr inside = i[2] >= te::int_imm(1) && i[2] < te::int_imm(9) && i[3] >= te::int_imm(1) && i[3] < te::int_imm(9);
    return te::select(inside, te::at(x, {i[0], i[1], i[2] - 1, i[3] - 1}), te::float_imm(0.0));
  });
  auto w = te::placeholder("W", DType::Float32, {4, 3, 3, 3});
  auto o = te::reduce("O", "conv", DType::Float32, {1, 4, 8, 8}, te::Reducer::Sum, {3, 3, 3},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) {
                        return te::at(p, {i[0], r[0], i[2] + r[1], i[3] + r[2]}) * te::at(w, {i[1], r[0], r[1], r[2]});
                      });
  return dag_of({o});
}

/// Stages: A=0 (rows x cols), S=1 = reducer over each row (sum by default).
inline DagRef row_reduce_dag(int64_t rows = 16, int64_t cols = 100, te::Reducer reducer = te::Reducer::Sum) {
  auto a = te::placeholder("A", DType::Float32, {rows, cols});
  auto s = te::reduce("S", "reduction", DType::Float32, {rows}, reducer, {cols},
                      [&](const std::vector<te::Expr>& i, const std::vector<te::Expr>& r) { return te::at(a, {i[0], r[0]}); });
  return dag_of({s});
}

// Step shorthands: the tests read like schedules.
inline StepRef split(int stage, int iter, std::vector<std::optional<int64_t>> lengths, bool inner_to_outer = true) {
  return std::make_shared<SplitStep>(stage, iter, -1, std::move(lengths), inner_to_outer);
}
inline StepRef fuse(int stage, std::vector<int> iters) { return std::make_shared<FuseStep>(stage, std::move(iters)); }
inline StepRef reorder(int stage, std::vector<int> order) { return std::make_shared<ReorderStep>(stage, std::move(order)); }
inline StepRef annotate(int stage, int iter, IteratorAnnotation a) { return std::make_shared<AnnotationStep>(stage, iter, a); }
inline StepRef pragma(int stage, int iter, std::string p) { return std::make_shared<PragmaStep>(stage, iter, std::move(p)); }
inline StepRef compute_at(int stage, int target, int iter) { return std::make_shared<ComputeAtStep>(stage, target, iter); }
inline StepRef compute_inline(int stage) { return std::make_shared<ComputeInlineStep>(stage); }
inline StepRef compute_root(int stage) { return std::make_shared<ComputeRootStep>(stage); }
inline StepRef cache_read(int stage, std::string scope, std::vector<int> readers) {
  return std::make_shared<CacheReadStep>(stage, std::move(scope), std::move(readers));
}
inline StepRef cache_write(int stage, std::string scope) { return std::make_shared<CacheWriteStep>(stage, std::move(scope)); }
inline StepRef rfactor(int stage, int iter, int factor_iter) { return std::make_shared<RfactorStep>(stage, iter, factor_iter); }

/// The state's stage computations as a DAG of their own: each stage's op (as the steps rewrote it)
/// with loads redirected from the stages' identity tensors to mirror tensors that carry those ops, so
/// te::evaluate can run it. Loop structure does not matter here; only what each stage computes.
inline te::ComputeDAG state_as_dag(const State& s) {
  te::ComputeDAG dag;
  std::map<const te::TensorNode*, te::TensorRef> mirror;
  auto redirect = [&](const te::Expr& load) -> te::Expr {
    auto it = mirror.find(load->tensor.get());
    return it == mirror.end() ? nullptr : te::load(it->second, load->args);
  };
  for (const Stage& st : s.stages()) {
    if (st.kind == StageKind::Placeholder) {
      dag.placeholders.push_back(st.tensor);
      continue;
    }
    auto op = std::make_shared<te::Stage>(*st.op);
    op->body = te::rewrite_loads(op->body, redirect);
    op->init = te::rewrite_loads(op->init, redirect);
    auto t = std::make_shared<te::TensorNode>();
    t->name = st.name();
    t->dtype = op->dtype;
    t->shape = op->shape;
    t->stage = op;
    mirror[st.tensor.get()] = t;
    dag.tensors.push_back(t);
  }
  for (const te::TensorRef& o : s.dag().outputs) dag.outputs.push_back(mirror.at(o.get()));
  return dag;
}

/// Evaluates the DAG and the state's stage computations on the same random inputs and expects equal
/// outputs.
inline void expect_computes_the_dag(const State& s, unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::map<const te::TensorNode*, Tensor> feed;
  for (const te::TensorRef& p : s.dag().placeholders) {
    std::vector<double> values(static_cast<size_t>(num_elements(p->shape)));
    for (double& v : values) v = dist(rng);
    feed[p.get()] = Tensor::from_doubles(p->dtype, p->shape, values);
  }
  std::vector<Tensor> want = te::evaluate(s.dag(), feed);
  std::vector<Tensor> got = te::evaluate(state_as_dag(s), feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape());
    for (int64_t i = 0; i < want[k].size(); ++i) {
      double w = want[k].get_double(i), v = got[k].get_double(i);
      ASSERT_NEAR(v, w, 1e-4 + 1e-4 * std::abs(w)) << "output " << k << " [" << i << "]";
    }
  }
}

}  // namespace kiln::state::testing
