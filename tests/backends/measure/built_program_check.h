/// \file Test-only check of a built measurement module: dlopen it in this process, run it on seeded
/// random inputs and compare its outputs with the tensor-expression evaluator. The real runners run
/// modules in a child process (a crash must not take the tuner down); a test can afford to crash.
#pragma once
#include <dlfcn.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "scheduler/measure/measure.h"
#include "scheduler/te/te_eval.h"

namespace kiln::testing {

/// Runs `r` (built from a state of `dag`) and returns "" when every output matches the evaluator on the
/// same inputs, else what went wrong. Placeholders with constant data (weights) keep their data.
inline std::string check_built_program(const measure::BuildResult& r, const te::ComputeDAG& dag, uint64_t seed,
                                       double rtol = 1e-3, double atol = 1e-4) {
  if (r.error != measure::MeasureError::None) return fmt::format("build failed: {}", r.error_msg);
  void* handle = dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return fmt::format("dlopen {}: {}", r.so_path, dlerror());
  struct Close {
    void* h;
    ~Close() { dlclose(h); }
  } close_handle{handle};
  auto fn = reinterpret_cast<void (*)(void**, void*)>(dlsym(handle, r.func_name.c_str()));
  if (!fn) return fmt::format("{}: no symbol {}", r.so_path, r.func_name);

  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 2);
  std::map<const te::TensorNode*, Tensor> by_node;
  std::vector<Tensor> inputs;
  for (const te::TensorRef& p : dag.placeholders) {
    Tensor t = p->constant ? *p->constant : Tensor(p->dtype, p->shape);
    if (!p->constant)
      for (int64_t i = 0; i < num_elements(p->shape); ++i) {
        if (is_float(p->dtype)) t.set_double(i, real(rng));
        else t.set_int(i, p->dtype == DType::Bool ? small(rng) % 2 : small(rng));
      }
    if (!p->constant) by_node[p.get()] = t;
    inputs.push_back(t);
  }
  const std::vector<Tensor> want = te::evaluate(dag, by_node);

  // Buffers as the spec says (with slack, as a runner allocates), inputs copied in.
  std::vector<std::vector<std::byte>> memory;
  std::vector<void*> ptrs;
  size_t n_inputs = 0;
  std::vector<size_t> output_params;
  for (size_t i = 0; i < r.buffers.size(); ++i) {
    memory.emplace_back(static_cast<size_t>(r.buffers[i].bytes) + 64);
    ptrs.push_back(memory.back().data());
    if (r.buffers[i].role == measure::BufferRole::Input) {
      if (n_inputs >= inputs.size() || inputs[n_inputs].byte_size() != static_cast<size_t>(r.buffers[i].bytes))
        return fmt::format("buffer {} ({}) does not match placeholder {}", i, r.buffers[i].name, n_inputs);
      std::memcpy(ptrs.back(), inputs[n_inputs].data(), inputs[n_inputs].byte_size());
      ++n_inputs;
    }
    if (r.buffers[i].role == measure::BufferRole::Output) output_params.push_back(i);
  }
  if (n_inputs != inputs.size()) return "the spec has fewer input buffers than the DAG has placeholders";
  fn(ptrs.data(), nullptr);

  // Outputs are the DAG's distinct outputs, in order.
  std::map<const te::TensorNode*, size_t> param_of;
  for (const te::TensorRef& out : dag.outputs)
    if (!param_of.count(out.get())) {
      if (param_of.size() >= output_params.size()) return "the spec has fewer output buffers than the DAG has outputs";
      const size_t k = param_of.size();
      param_of[out.get()] = output_params[k];
    }
  for (size_t i = 0; i < dag.outputs.size(); ++i) {
    const te::TensorRef& out = dag.outputs[i];
    Tensor got(out->dtype, out->shape);
    std::memcpy(got.data(), ptrs[param_of[out.get()]], got.byte_size());
    for (int64_t e = 0; e < num_elements(out->shape); ++e) {
      const double g = got.get_double(e), w = want[i].get_double(e);
      if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
        return fmt::format("output {} element {}: got {}, want {}", out->name, e, g, w);
    }
  }
  return "";
}

}  // namespace kiln::testing
