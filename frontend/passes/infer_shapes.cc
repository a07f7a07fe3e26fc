#include "frontend/passes/infer_shapes.h"

#include <algorithm>
#include <cstdint>

#include "frontend/ir/narrow_types.h"
#include "frontend/ops/op_registry.h"
#include "frontend/passes/bound_run_time_shapes.h"
#include "frontend/passes/fuse_qdq.h"
#include "frontend/passes/inline_if.h"
#include "frontend/passes/resolve_sequences.h"
#include "frontend/ir/step_loop.h"
#include "frontend/passes/roll_loops.h"
#include "frontend/passes/splice_subgraph.h"
#include "frontend/passes/unroll_loops.h"

namespace kiln {
namespace {

// Folding evaluates with the double-precision reference; keep it to tensors of a sane size so that
// compile time stays bounded (the compiled kernel handles the rest at run time).
constexpr int64_t kMaxFoldElements = int64_t{1} << 27;

// Every size kiln computes from a shape (buffer bytes, workspace offsets, the header's *_SIZE macros)
// is int64 arithmetic; a shape whose bytes pass 2^48 (256 TiB) is a mistake or an attack, and past
// 2^63 its size would wrap. Checked with overflow-safe products before anything uses the size.
constexpr uint64_t kMaxValueBytes = uint64_t{1} << 48;

void check_value_size(const std::string& what, DType dtype, const Shape& shape) {
  uint64_t bytes = std::max<size_t>(dtype_size(dtype), 1);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) || bytes > kMaxValueBytes)
      throw Error(what + " has shape " + shape_str(shape) + ", which is too large (over 2^48 bytes)");
}

// The narrow types are storage (narrow_types.h): only ops that convert or move values take them.
void refuse_narrow_inputs(const Node& n, const Graph& g) {
  for (const auto& in : n.inputs)
    if (!in.empty() && g.value(in).typed && is_narrow(g.value(in).dtype))
      throw Unsupported(n.label() + ": input '" + in + "' has dtype " + dtype_name(g.value(in).dtype) + ", which " +
                        n.op_type + " does not take (only conversions and reshapes do)");
}

// A weight stored in a narrow type stays packed, as the model ships it, and is dequantized in the loop
// that reads it instead of being expanded into floats at compile time.
bool dequantizes_narrow_weight(const Node& n, const Graph& g) {
  return n.op_type == "DequantizeLinear" && is_narrow(g.value(n.inputs.at(0)).dtype);
}

bool all_inputs_constant(const Node& n, const Graph& g) {
  for (const auto& in : n.inputs)
    if (!in.empty() && !g.value(in).constant) return false;
  return true;
}

void fold(const Node& n, const OpDef& op, Graph& g) {
  std::vector<const Tensor*> ins;
  for (const auto& in : n.inputs) ins.push_back(in.empty() ? nullptr : g.value(in).constant.get());
  EvalContext ec(n, std::move(ins));
  op.eval(ec);
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i].empty()) continue;
    if (i >= ec.outputs().size() || ec.outputs()[i].dtype() == DType::Undefined)
      throw Error(n.label() + ": reference kernel produced no output " + std::to_string(i));
    Value& v = g.value(n.outputs[i]);
    const Tensor& t = ec.outputs()[i];
    if (v.dtype != t.dtype() || v.shape != t.shape())
      throw Error(n.label() + ": shape inference says output " + std::to_string(i) + " is " + dtype_name(v.dtype) +
                  " " + shape_str(v.shape) + " but the kernel produced " + dtype_name(t.dtype()) + " " +
                  shape_str(t.shape()));
    v.constant = std::make_shared<const Tensor>(t);
  }
}

// Errors raised inside an op name the node; prefix the file so the one-line message names both.
template <typename Fn>
void naming_source(const Graph& g, Fn&& fn) {
  try {
    fn();
  } catch (const NotConstant& e) {
    throw NotConstant(g.source + ": " + e.what(), e.value_name());
  } catch (const Unsupported& e) {
    throw Unsupported(g.source + ": " + e.what());
  } catch (const Error& e) {
    throw Error(g.source + ": " + e.what());
  }
}

void infer_all_nodes(Graph& g, const InferOptions& o) {
  for (const std::string& in : g.inputs) {
    if (!g.value(in).typed) throw Error("graph input '" + in + "' has no bound shape");
    check_value_size("graph input '" + in + "'", g.value(in).dtype, g.value(in).shape);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    // An If becomes its branches' nodes, a Loop its next iteration and a Loop for the rest, a Scan its
    // iterations, a sequence op the tensor nodes it comes to (the first of them may be another of
    // these), inferred from here on.
    while (i < g.nodes.size()) {
      if (g.nodes[i].op_type == "If" && is_control_flow(g.nodes[i])) inline_if(g, i);
      else if (is_control_flow(g.nodes[i]) && roll_loop(g, i)) break;  // a StepLoop, inferred below
      else if (g.nodes[i].op_type == "Loop" && is_control_flow(g.nodes[i])) unroll_loop_step(g, i);
      else if (is_control_flow(g.nodes[i])) unroll_scan(g, i);
      else if (reads_or_makes_sequences(g.nodes[i], g)) resolve_sequence_node(g, i);
      else if (has_run_time_shape(g.nodes[i], g)) bound_run_time_shape(g, i);
      else break;
    }
    if (i == g.nodes.size()) break;
    const Node& n = g.nodes[i];
    if (o.only_untyped && std::all_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& out) {
          return out.empty() || g.value(out).typed;
        }))
      continue;
    const OpDef* op = find_op(n.domain, n.op_type);
    if (!op) throw Unsupported(n.label() + ": op is not supported");
    for (const auto& in : n.inputs)
      if (!in.empty() && !g.value(in).typed)
        throw Error(n.label() + ": input '" + in + "' has no inferred type");
    if (!op->takes_narrow_types) refuse_narrow_inputs(n, g);
    InferContext ic(n, g);
    try {
      op->infer(ic);
    } catch (const Error& e) {
      if (n.guards.empty() || dynamic_cast<const NotConstant*>(&e)) throw;
      // A branch of an If decided at run time must have static shapes whichever input it sees.
      const std::string msg = std::string(e.what()) + " (in a branch of an If decided at run time, " + guards_str(n.guards) +
                              "; --freeze the inputs of its condition to compile only the branch taken)";
      if (dynamic_cast<const Unsupported*>(&e)) throw Unsupported(msg);
      throw Error(msg);
    }
    const auto& outs = ic.outputs();
    bool produced_constants = false;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      if (i >= outs.size() || !outs[i].set) throw Error(n.label() + ": shape inference set no output " + std::to_string(i));
      if (!is_supported(outs[i].dtype) || (is_narrow(outs[i].dtype) && !op->takes_narrow_types))
        throw Unsupported(n.label() + ": output dtype " + dtype_name(outs[i].dtype) + " is not supported");
      check_value_size(n.label() + ": output " + std::to_string(i), outs[i].dtype, outs[i].shape);
      Value& v = g.value(n.outputs[i]);
      v.dtype = outs[i].dtype;
      v.shape = outs[i].shape;
      v.typed = true;
      v.constant = outs[i].constant;
      produced_constants |= v.constant != nullptr;
    }
    if (!g.run_time_extents.empty()) carry_run_time_extents(g, n);
    if (produced_constants || !all_inputs_constant(n, g)) continue;
    // A quantized weight that compiling fuses into an integer kernel stays int8 (fuse_qdq.h).
    if (n.op_type == "DequantizeLinear" && is_fused_qdq_weight(g, n)) continue;
    if (dequantizes_narrow_weight(n, g)) continue;
    // A loop of known inputs runs at compile time only as long as its unrolling would have been
    // allowed to be: a hostile trip count must not hang the compiler.
    if (is_step_loop(n)) {
      const StepLoop loop = read_step_loop(n);
      if (static_cast<double>(loop.trip_count) * static_cast<double>(loop.body->nodes.size()) > static_cast<double>(kMaxExpandedNodes))
        continue;
    }
    int64_t out_elems = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (!n.outputs[i].empty()) out_elems += num_elements(g.value(n.outputs[i]).shape);
    if (out_elems <= std::min(kMaxFoldElements, o.max_fold_elements)) fold(n, *op, g);
  }
  for (const std::string& o : g.outputs)
    if (!g.value(o).typed) throw Error("graph output '" + o + "' has no inferred type");
  flatten_composite_outputs(g);
  add_count_outputs(g);
}

}  // namespace

void infer_shapes(Graph& g, const InferOptions& o) {
  naming_source(g, [&] { infer_all_nodes(g, o); });
}

}  // namespace kiln
