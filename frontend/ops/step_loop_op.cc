// kiln.StepLoop: a body graph run trip_count times, compiled once and called in a loop by the
// generated code (frontend/ir/step_loop.h has the contract). The reference runs the body with the
// reference interpreter once per iteration, so it checks the body as every other graph is checked.
#include <algorithm>
#include <cstring>

#include "frontend/ir/step_loop.h"
#include "frontend/ops/misc_family.h"
#include "frontend/reference/interpreter.h"

namespace kiln::misc {
namespace {

// The tensors of `parts` (one dtype and shape) along a new first axis.
Tensor stacked(const std::vector<Tensor>& parts) {
  Shape shape{static_cast<int64_t>(parts.size())};
  shape.insert(shape.end(), parts.front().shape().begin(), parts.front().shape().end());
  Tensor out(parts.front().dtype(), shape);
  size_t at = 0;
  for (const Tensor& p : parts) {
    std::memcpy(out.data() + at, p.data(), p.byte_size());
    at += p.byte_size();
  }
  return out;
}

OpDef step_loop_op() {
  OpDef d;
  d.op_type = "StepLoop";
  d.domain = "kiln";
  d.infer = [](InferContext& c) {
    const StepLoop loop = read_step_loop(c.node());
    const Graph& body = *loop.body;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      c.require_input(i, "a carried or invariant value");
      const Value& bin = body.value(body.inputs[i + 1]);
      if (c.dtype(i) != bin.dtype || c.shape(i) != bin.shape)
        c.fail("input " + std::to_string(i) + " is " + dtype_name(c.dtype(i)) + " " + shape_str(c.shape(i)) +
               " but the body takes " + dtype_name(bin.dtype) + " " + shape_str(bin.shape));
    }
    for (size_t i = 0; i < body.outputs.size(); ++i) {
      if (!c.has_output(i)) continue;
      const Value& out = body.value(body.outputs[i]);
      if (static_cast<int64_t>(i) < loop.carried) {
        c.set_output(i, out.dtype, out.shape);
        continue;
      }
      Shape stacked{loop.trip_count};
      stacked.insert(stacked.end(), out.shape.begin(), out.shape.end());
      c.set_output(i, out.dtype, stacked);
    }
  };
  d.eval = [](EvalContext& c) {
    const StepLoop loop = read_step_loop(c.node());
    const Graph& body = *loop.body;
    std::map<std::string, Tensor> in;
    for (size_t i = 0; i < c.num_inputs(); ++i) in[body.inputs[i + 1]] = c.input(i);
    const size_t carried = static_cast<size_t>(loop.carried);
    std::vector<std::vector<Tensor>> scans(body.outputs.size() - carried);
    for (int64_t k = 0; k < loop.trip_count; ++k) {
      if (loop.condition && in.at(body.inputs[1]).get_double(0) == 0) break;
      if (loop.trip_limit && k >= in.at(body.inputs[carried + 1]).get_int(0)) break;
      in[body.inputs[0]] = Tensor::scalar_int(DType::Int64, k);
      std::vector<Tensor> out = run_reference(body, in);
      for (size_t i = 0; i < carried; ++i) in[body.inputs[i + 1]] = out[i];
      for (size_t j = 0; j < scans.size(); ++j) scans[j].push_back(std::move(out[carried + j]));
    }
    for (size_t i = 0; i < carried; ++i)
      if (c.has_output(i)) c.set_output(i, in.at(body.inputs[i + 1]));
    for (size_t j = 0; j < scans.size(); ++j) {
      if (!c.has_output(carried + j)) continue;
      if (loop.scan_reverse[j]) std::reverse(scans[j].begin(), scans[j].end());
      c.set_output(carried + j, stacked(scans[j]));
    }
  };
  // Every iteration's (the most iterations, for a loop that may stop early).
  d.flops = [](const NodeShapes& s) {
    const StepLoop loop = read_step_loop(s.node);
    double per_iteration = 0;
    for (const Node& n : loop.body->nodes) per_iteration += node_flops(n, *loop.body);
    return per_iteration * static_cast<double>(loop.trip_count);
  };
  return d;
}

}  // namespace

void register_step_loop_op(OpRegistry& r) {
  r.add(step_loop_op());
}

}  // namespace kiln::misc
