// The JIT-compiled lowering of a state against the tensor-expression evaluator, for tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/llvm/jit.h"
#include "scheduler/lower/lower_state.h"
#include "scheduler/te/te_eval.h"

namespace kiln::testing {

// Max abs difference between the JIT-compiled `f`, a lowering of `dag` whose parameters start with the
// DAG's placeholders and include a buffer named as each output, and the evaluator. Elements are
// float32, or int32 (inputs then in [-100, 100]) where the placeholder or output is.
inline double max_error(const lower::LoweredFunc& f, const te::ComputeDAG& dag, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::uniform_int_distribution<int32_t> ints(-100, 100);
  // An int32 element lives in a float's four bytes.
  auto put = [](float& slot, DType t, double v) {
    if (t != DType::Int32) {
      slot = static_cast<float>(v);
      return;
    }
    const auto i = static_cast<int32_t>(v);
    std::memcpy(&slot, &i, sizeof i);
  };
  auto get = [](const float& slot, DType t) {
    if (t != DType::Int32) return static_cast<double>(slot);
    int32_t i = 0;
    std::memcpy(&i, &slot, sizeof i);
    return static_cast<double>(i);
  };
  std::map<const te::TensorNode*, Tensor> inputs;
  std::vector<std::vector<float>> storage;
  std::vector<void*> ptrs;
  for (const lower::BufferRef& b : f.params) {
    storage.emplace_back(static_cast<size_t>(std::max<int64_t>(b->size, 1)));
    ptrs.push_back(storage.back().data());
  }
  for (size_t i = 0; i < dag.placeholders.size(); ++i) {
    const te::TensorRef& p = dag.placeholders[i];
    Tensor t(p->dtype, p->shape);
    for (int64_t e = 0; e < num_elements(p->shape); ++e) {
      // A weight keeps its values.
      const double v = p->constant ? p->constant->get_double(e) : p->dtype == DType::Int32 ? ints(rng) : dist(rng);
      put(storage[i][static_cast<size_t>(e)], p->dtype, v);
      t.set_double(e, get(storage[i][static_cast<size_t>(e)], p->dtype));
    }
    inputs[p.get()] = std::move(t);
  }
  llvm_backend::JitFunction jit(f);
  jit.run(ptrs);
  std::vector<Tensor> want = te::evaluate(dag, inputs);
  double err = 0;
  for (size_t o = 0; o < dag.outputs.size(); ++o) {
    size_t at = 0;
    while (at < f.params.size() && f.params[at]->name != dag.outputs[o]->name) ++at;
    if (at == f.params.size()) return INFINITY;  // no output buffer: as wrong as can be
    const auto& got = storage[at];
    for (int64_t e = 0; e < num_elements(dag.outputs[o]->shape); ++e)
      err = std::max(err, std::abs(get(got[static_cast<size_t>(e)], dag.outputs[o]->dtype) - want[o].get_double(e)));
  }
  return err;
}

// Max abs difference between the JIT-compiled state and the evaluator.
inline double max_error(const state::State& s, uint32_t seed = 1) {
  return max_error(lower::lower_state_func(s, "prog"), s.dag(), seed);
}

}  // namespace kiln::testing
