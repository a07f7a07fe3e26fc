#include "frontend/passes/roll_loops.h"

#include <algorithm>

#include "frontend/ir/error.h"
#include "frontend/ir/step_loop.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/node_emitter.h"
#include "frontend/passes/splice_subgraph.h"
#include "frontend/passes/unroll_loops.h"

namespace kiln {
namespace {

bool present(const Node& n, size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); }

// A StepLoop body being made from a Loop's or Scan's: its inputs typed from the outer values bound to
// them, and the outer values it reads made inputs (or constants) of its own.
class BodyBuilder {
 public:
  BodyBuilder(const Graph& g, const Graph& body) : g_(g), b_(std::make_shared<Graph>(body)) { b_->inputs.clear(); }

  Graph& body() { return *b_; }
  std::shared_ptr<const Graph> done() { return b_; }

  void iteration(const std::string& name) { input(name, DType::Int64, {}); }
  // Body value `name` enters as outer value `outer` each iteration (carried, or invariant).
  void bound(const std::string& name, const std::string& outer) {
    const Value& v = g_.value(outer);
    input(name, v.dtype, v.shape);
  }
  // A body value known before the loop runs: a constant of the body.
  void constant(const std::string& name, std::shared_ptr<const Tensor> t) {
    Value& v = b_->values[name];
    v.name = name;
    v.dtype = t->dtype();
    v.shape = t->shape();
    v.typed = true;
    v.constant = std::move(t);
  }
  // The outer values the body reads, as invariant inputs (constants become the body's): appended to
  // `loop_inputs`, the StepLoop's inputs.
  void outer_reads(std::vector<std::string>& loop_inputs) {
    for (const std::string& name : outer_references(*b_)) {
      const Value& v = g_.value(name);
      if (v.constant) {
        constant(name, v.constant);
        continue;
      }
      input(name, v.dtype, v.shape);
      loop_inputs.push_back(name);
    }
  }

 private:
  void input(const std::string& name, DType dtype, Shape shape) {
    Value& v = b_->values[name];
    v = Value{};
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.typed = true;
    b_->inputs.push_back(name);
  }

  const Graph& g_;
  std::shared_ptr<Graph> b_;
};

// Whether an inferred body can run as a StepLoop's: tensors only, no run-time If, no loop in it.
bool fits_step_loop(const Graph& body) {
  for (const Node& n : body.nodes)
    if (!n.guards.empty() || is_step_loop(n) || is_control_flow(n)) return false;
  for (const auto& [name, v] : body.values)
    if (v.kind != ValueKind::Tensor || !v.typed) return false;
  return true;
}

// Infers `b` and checks it fits; false where it does not (it then stays for unrolling).
bool infer_body(Graph& b) {
  try {
    infer_shapes(b);
  } catch (const Error&) {
    return false;  // e.g. a shape that needs the iteration number at compile time
  }
  return fits_step_loop(b);
}

bool roll_onnx_loop(Graph& g, size_t index) {
  const Node node = g.nodes[index];
  if (node.has_attr("kiln_iteration")) return false;  // unrolling has begun
  // The most iterations: the trip count, or the user's bound on one decided at run time.
  const Value* m = present(node, 0) ? &g.value(node.inputs[0]) : nullptr;
  if (!m || (!m->constant && !node.has_attr(kMaxTripCountAttr))) return false;
  const bool trip_limit = !m->constant;
  const int64_t trips = trip_limit ? node.attr_int(kMaxTripCountAttr, 0) : m->constant->get_int(0);
  if (trips < kMinRolledIterations) return false;
  const Value* cond_in = present(node, 1) ? &g.value(node.inputs[1]) : nullptr;
  if (cond_in && cond_in->constant && cond_in->constant->get_double(0) == 0) return false;  // runs no iteration
  const Graph& onnx_body = subgraph_attr(node, "body");
  const size_t carried = node.inputs.size() > 2 ? node.inputs.size() - 2 : 0;
  if (onnx_body.inputs.size() != 2 + carried || onnx_body.outputs.size() < 1 + carried) return false;  // unrolling says why

  // First as a loop that always runs its iterations (the condition constant true throughout); when
  // the body's condition is not, again with the condition carried.
  for (const bool condition : {false, true}) {
    if (!condition && cond_in && !cond_in->constant) continue;
    BodyBuilder b(g, onnx_body);
    b.iteration(onnx_body.inputs[0]);
    std::vector<std::string> loop_inputs;
    if (condition) {
      const std::string start = cond_in ? node.inputs[1] : g.add_constant(node.name + "/true", Tensor::scalar_int(DType::Bool, 1));
      b.bound(onnx_body.inputs[1], start);
      loop_inputs.push_back(start);
    } else {
      b.constant(onnx_body.inputs[1], std::make_shared<const Tensor>(Tensor::scalar_int(DType::Bool, 1)));
    }
    for (size_t j = 0; j < carried; ++j) {
      b.bound(onnx_body.inputs[2 + j], node.inputs[2 + j]);
      loop_inputs.push_back(node.inputs[2 + j]);
    }
    if (trip_limit) {
      const std::string limit = node.name + "/trip_count";
      b.bound(limit, node.inputs[0]);
      loop_inputs.push_back(node.inputs[0]);
    }
    b.outer_reads(loop_inputs);
    Graph& body = b.body();
    if (!infer_body(body)) return false;
    const Value& cond_out = body.value(body.outputs[0]);
    const bool always = cond_out.constant && cond_out.constant->get_double(0) != 0;
    if (!condition && !always) continue;  // a condition that may end the loop: carry it
    if (!condition) body.outputs.erase(body.outputs.begin());
    const size_t loop_carried = carried + (condition ? 1 : 0);
    if ((condition || trip_limit) && body.outputs.size() != loop_carried) return false;  // scan outputs of run-time length
    std::vector<std::string> outputs;
    if (condition) outputs.push_back("");  // the final condition: no ONNX output
    outputs.insert(outputs.end(), node.outputs.begin(), node.outputs.end());
    outputs.resize(body.outputs.size());
    StepLoop loop{b.done(), trips, static_cast<int64_t>(loop_carried), std::vector<int64_t>(body.outputs.size() - loop_carried, 0)};
    loop.condition = condition;
    loop.trip_limit = trip_limit;
    Node rolled = make_step_loop(node.name, loop, std::move(loop_inputs), std::move(outputs));
    try {
      read_step_loop(rolled);
    } catch (const Error&) {
      return false;  // a carried value that changes type or shape
    }
    rolled.guards = node.guards;
    if (trip_limit) g.limits.push_back(max_trip_count_limit(node, trips));
    g.nodes[index] = std::move(rolled);
    return true;
  }
  return false;
}

bool roll_scan(Graph& g, size_t index) {
  const Node node = g.nodes[index];
  if (node.opset < 9) return false;
  const Graph& onnx_body = subgraph_attr(node, "body");
  const int64_t num_scan = node.attr_int("num_scan_inputs", 0);
  if (num_scan < 1 || static_cast<size_t>(num_scan) > node.inputs.size()) return false;
  const size_t states = node.inputs.size() - static_cast<size_t>(num_scan);
  if (onnx_body.inputs.size() != node.inputs.size() || onnx_body.outputs.size() < states) return false;
  const size_t scan_outputs = onnx_body.outputs.size() - states;
  auto per = [&](const char* attr, size_t count) { return node.attr_ints(attr, std::vector<int64_t>(count, 0)); };
  std::vector<int64_t> in_axes = per("scan_input_axes", static_cast<size_t>(num_scan));
  const std::vector<int64_t> in_dirs = per("scan_input_directions", static_cast<size_t>(num_scan));
  const std::vector<int64_t> out_axes = per("scan_output_axes", scan_outputs);
  const std::vector<int64_t> out_dirs = per("scan_output_directions", scan_outputs);
  if (in_axes.size() != static_cast<size_t>(num_scan) || in_dirs.size() != in_axes.size() || out_axes.size() != scan_outputs ||
      out_dirs.size() != scan_outputs)
    return false;
  int64_t length = -1;
  for (size_t i = 0; i < in_axes.size(); ++i) {
    const Shape& s = g.value(node.inputs[states + i]).shape;
    const auto rank = static_cast<int64_t>(s.size());
    if (in_axes[i] < -rank || in_axes[i] >= rank) return false;
    if (in_axes[i] < 0) in_axes[i] += rank;
    const int64_t extent = s[static_cast<size_t>(in_axes[i])];
    if (length >= 0 && extent != length) return false;
    length = extent;
  }
  if (length < kMinRolledIterations) return false;

  BodyBuilder b(g, onnx_body);
  const std::string iter = node.name + "/iteration";
  b.iteration(iter);
  std::vector<std::string> loop_inputs;
  for (size_t j = 0; j < states; ++j) {
    b.bound(onnx_body.inputs[j], node.inputs[j]);
    loop_inputs.push_back(node.inputs[j]);
  }
  // Each scan input whole, an invariant; the body reads the iteration's element of it first.
  Graph& body = b.body();
  Node owner = node;
  owner.guards.clear();
  NodeEmitter e(body, owner);
  std::string reversed_iter;
  for (size_t i = 0; i < in_axes.size(); ++i) {
    const std::string whole = node.name + "/scan_input" + std::to_string(i);
    b.bound(whole, node.inputs[states + i]);
    loop_inputs.push_back(node.inputs[states + i]);
    if (in_dirs[i] && reversed_iter.empty()) reversed_iter = e.op("Sub", {e.int64(length - 1), iter});
    e.op("Gather", {whole, in_dirs[i] ? reversed_iter : iter}, {{"axis", AttrValue(in_axes[i])}}, onnx_body.inputs[states + i]);
  }
  body.nodes.insert(body.nodes.begin(), e.nodes().begin(), e.nodes().end());
  b.outer_reads(loop_inputs);
  if (!infer_body(body)) return false;

  // Scan outputs stack along axis 0 in the loop; one wanted along another axis is transposed there.
  std::vector<std::string> outputs(node.outputs.begin(), node.outputs.begin() + static_cast<std::ptrdiff_t>(std::min(states, node.outputs.size())));
  outputs.resize(states);
  NodeEmitter after(g, node);
  for (size_t j = 0; j < scan_outputs; ++j) {
    const std::string wanted = states + j < node.outputs.size() ? node.outputs[states + j] : "";
    const auto rank = static_cast<int64_t>(body.value(body.outputs[states + j]).shape.size()) + 1;
    int64_t axis = out_axes[j];
    if (axis < -rank || axis >= rank) return false;
    if (axis < 0) axis += rank;
    if (wanted.empty() || axis == 0) {
      outputs.push_back(wanted);
      continue;
    }
    const std::string stacked = after.fresh("stacked");
    std::vector<int64_t> perm;
    for (int64_t d = 1; d < rank; ++d) perm.push_back(d);
    perm.insert(perm.begin() + axis, 0);
    after.op("Transpose", {stacked}, {{"perm", AttrValue(perm)}}, wanted);
    outputs.push_back(stacked);
  }
  StepLoop loop{b.done(), length, static_cast<int64_t>(states), out_dirs};
  Node rolled = make_step_loop(node.name, loop, std::move(loop_inputs), std::move(outputs));
  try {
    read_step_loop(rolled);
  } catch (const Error&) {
    return false;
  }
  rolled.guards = node.guards;
  std::vector<Node> nodes{std::move(rolled)};
  nodes.insert(nodes.end(), after.nodes().begin(), after.nodes().end());
  replace_node(g, index, nodes);
  return true;
}

}  // namespace

bool roll_loop(Graph& g, size_t index) {
  const Node& n = g.nodes.at(index);
  if (!is_control_flow(n)) return false;
  if (n.op_type == "Loop") return roll_onnx_loop(g, index);
  if (n.op_type == "Scan") return roll_scan(g, index);
  return false;
}

}  // namespace kiln
