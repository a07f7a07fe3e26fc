#include "frontend/passes/unroll_loops.h"

#include <algorithm>
#include <optional>

#include "frontend/ir/error.h"
#include "frontend/passes/node_emitter.h"
#include "frontend/passes/splice_subgraph.h"

namespace kiln {
namespace {

constexpr const char* kIteration = "kiln_iteration";  // a Loop for the rest: the next iteration's number
constexpr const char* kScanParts = "kiln_scan_parts";  // ... and its earlier iterations' scan values

// One iteration's value of a scan output, with the axis the iterations stack along.
std::string stack_part(NodeEmitter& out, const std::string& v, int64_t axis) { return out.op("Unsqueeze", {v, out.ints({axis})}); }

bool present(const Node& n, size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); }

// Opset 8's Scan (inputs: sequence_lens, then states and scan inputs, all with a leading batch axis)
// as one opset-9 Scan per batch row, restacked along the batch axis: the Scans are unrolled in turn.
// Rows shorter than the sequence (sequence_lens) are not supported.
void scan8_as_scans_per_row(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  const int64_t num_scan = node.required_int("num_scan_inputs");
  if (node.inputs.empty() || num_scan < 1 || static_cast<size_t>(num_scan) > node.inputs.size() - 1)
    throw Error(node.label() + ": attribute 'num_scan_inputs' is " + std::to_string(num_scan) + " for " +
                std::to_string(node.inputs.size()) + " inputs (the first sequence_lens)");
  const std::vector<std::string> ins(node.inputs.begin() + 1, node.inputs.end());
  const Value& first_scan = g.value(ins[ins.size() - static_cast<size_t>(num_scan)]);
  if (first_scan.shape.size() < 2) throw Error(node.label() + ": a scan input needs a batch and a sequence axis");
  const int64_t batch = first_scan.shape[0], length = first_scan.shape[1];
  if (present(node, 0)) {
    const Tensor* lens = g.constant_input(node, 0);
    if (!lens) throw NotConstant(node.label() + ": sequence_lens '" + node.inputs[0] + "' must be known at compile time", node.inputs[0]);
    for (int64_t b = 0; b < lens->size(); ++b)
      if (lens->get_int(b) != length)
        throw Unsupported(node.label() + ": a sequence_lens shorter than the sequence (" + std::to_string(lens->get_int(b)) +
                          " of " + std::to_string(length) + ") is not supported");
  }
  for (const std::string& in : ins)
    if (g.value(in).shape.empty() || g.value(in).shape[0] != batch)
      throw Error(node.label() + ": input '" + in + "' does not have the batch axis of " + std::to_string(batch));
  check_expansion(g, static_cast<size_t>(batch) * (ins.size() + node.outputs.size() + 1), node.label());
  NodeEmitter out(g, node);
  std::vector<std::vector<std::string>> rows(node.outputs.size());
  std::vector<Node> scans;
  for (int64_t b = 0; b < batch; ++b) {
    Node scan = node;
    scan.name = node.name + "/row" + std::to_string(b);
    scan.opset = 9;
    scan.attrs.erase("directions");
    if (node.has_attr("directions")) scan.attrs["scan_input_directions"] = node.attrs.at("directions");
    scan.inputs.clear();
    for (const std::string& in : ins) scan.inputs.push_back(out.op("Gather", {in, out.int64(b)}, {{"axis", AttrValue(int64_t{0})}}));
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      scan.outputs[k] = node.outputs[k].empty() ? "" : g.add_value(scan.name + "/out", DType::Undefined, {});
      if (!scan.outputs[k].empty()) g.value(scan.outputs[k]).typed = false;
      rows[k].push_back(scan.outputs[k]);
    }
    scans.push_back(std::move(scan));
  }
  std::vector<Node> nodes = out.nodes();
  nodes.insert(nodes.end(), scans.begin(), scans.end());
  out.nodes().clear();
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k].empty()) continue;
    std::vector<std::string> parts;
    for (const std::string& v : rows[k]) parts.push_back(stack_part(out, v, 0));
    out.op("Concat", parts, {{"axis", AttrValue(int64_t{0})}}, node.outputs[k]);
  }
  nodes.insert(nodes.end(), out.nodes().begin(), out.nodes().end());
  replace_node(g, index, nodes);
}

}  // namespace

std::string max_trip_count_limit(const Node& loop, int64_t bound) {
  return loop.label() + " runs at most " + std::to_string(bound) + " iterations (--max-trip-count): a trip count '" +
         loop.inputs[0] + "' above that runs " + std::to_string(bound);
}

void unroll_loop_step(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  const Graph& body = subgraph_attr(node, "body");
  const size_t carried = node.inputs.size() > 2 ? node.inputs.size() - 2 : 0;
  if (body.inputs.size() != 2 + carried)
    throw Error(node.label() + ": its body has " + std::to_string(body.inputs.size()) + " inputs, expected 2 + " +
                std::to_string(carried) + " loop-carried values");
  if (body.outputs.size() < 1 + carried)
    throw Error(node.label() + ": its body has " + std::to_string(body.outputs.size()) + " outputs, fewer than 1 + " +
                std::to_string(carried) + " loop-carried values");
  const size_t scans = body.outputs.size() - 1 - carried;
  if (node.outputs.size() > carried + scans)
    throw Error(node.label() + ": has " + std::to_string(node.outputs.size()) + " outputs, its body gives " +
                std::to_string(carried + scans));
  const int64_t k = node.attr_int(kIteration, 0);
  std::vector<std::string> parts = node.has_attr(kScanParts) ? node.attr_strings(kScanParts) : std::vector<std::string>{};

  int64_t trips = -1;  // none: the condition alone ends the loop
  bool trips_at_run_time = false;  // `trips` is then the user's bound (--max-trip-count)
  if (present(node, 0)) {
    const Value& m = g.value(node.inputs[0]);
    if (m.constant) {
      trips = m.constant->get_int(0);
    } else if (node.has_attr(kMaxTripCountAttr)) {
      trips = node.attr_int(kMaxTripCountAttr, 0);
      trips_at_run_time = true;
    } else {
      throw NotConstant(node.label() + ": its trip count '" + node.inputs[0] +
                            "' must be known at compile time, or bounded with --max-trip-count " + node.name + "=N",
                        node.inputs[0]);
    }
  }
  std::optional<bool> cond = true;  // known at compile time, or not (a run-time condition)
  if (present(node, 1)) {
    const Value& c = g.value(node.inputs[1]);
    if (c.constant) cond = c.constant->get_double(0) != 0;
    else cond.reset();
  }
  const bool done = (trips >= 0 && k >= trips) || (cond && !*cond);
  NodeEmitter out(g, node);
  if (done) {
    for (size_t j = 0; j < carried && j < node.outputs.size(); ++j)
      if (!node.outputs[j].empty()) out.op("Identity", {node.inputs[2 + j]}, {}, node.outputs[j]);
    for (size_t s = 0; carried + s < node.outputs.size(); ++s) {
      const std::string& o = node.outputs[carried + s];
      if (o.empty()) continue;
      if (k == 0) throw Unsupported(node.label() + ": runs no iteration, so its scan output '" + o + "' has no known shape");
      std::vector<std::string> stacked;
      for (int64_t i = 0; i < k; ++i) stacked.push_back(parts[static_cast<size_t>(i) * scans + s]);
      out.op("Concat", stacked, {{"axis", AttrValue(int64_t{0})}}, o);
    }
    replace_node(g, index, out.nodes());
    return;
  }
  if ((!cond || trips_at_run_time) && scans > 0) {
    if (k == 0 && trips_at_run_time)
      throw NotConstant(node.label() + ": its trip count '" + node.inputs[0] +
                            "' must be known at compile time: it decides how many rows its scan outputs have",
                        node.inputs[0]);
    if (k == 0)
      throw NotConstant(node.label() + ": its condition '" + node.inputs[1] +
                            "' must be known at compile time: it decides how many rows its scan outputs have",
                        node.inputs[1]);
    throw Unsupported(node.label() + ": its body's condition is decided at run time, so its scan outputs' length is too");
  }
  if (trips < 0 && !cond)
    throw Unsupported(node.label() + ": runs until a condition decided at run time, with no trip count to bound it "
                      "(kiln unrolls loops)");
  if (k >= kMaxUnrolledIterations)
    throw Unsupported(node.label() + ": runs more than " + std::to_string(kMaxUnrolledIterations) +
                      " iterations, the most kiln unrolls");

  // Whether iteration k runs, when that is decided at run time: k < M for a trip count known only
  // then, and the condition; computed before the iteration, which runs under it.
  std::string runs;
  if (trips_at_run_time) runs = out.op("Less", {out.int64(k), node.inputs[0]});
  if (!cond) runs = runs.empty() ? node.inputs[1] : out.op("And", {runs, node.inputs[1]});
  std::vector<Node> nodes = std::move(out.nodes());
  out.nodes().clear();
  std::vector<Guard> guards = node.guards;
  if (!runs.empty()) guards.push_back({runs, true});
  if (trips_at_run_time && k == 0)
    g.limits.push_back(max_trip_count_limit(node, trips));
  std::vector<std::string> bound = {out.int64(k),
                                    present(node, 1) ? node.inputs[1] : g.add_constant(node.name + "/true", Tensor::scalar_int(DType::Bool, 1))};
  for (size_t j = 0; j < carried; ++j) bound.push_back(node.inputs[2 + j]);
  SplicedSubgraph it = splice_subgraph(g, body, node.name + "/iter" + std::to_string(k) + "/", guards, bound, node.label());
  for (Node& n : it.nodes) nodes.push_back(std::move(n));

  // The rest of the loop reads this iteration's results: where the iteration may not have run, the
  // values from before it.
  Node rest = node;
  rest.inputs = {present(node, 0) ? node.inputs[0] : "", it.outputs[0]};
  for (size_t j = 0; j < carried; ++j) {
    std::string next = it.outputs[1 + j];
    if (!runs.empty()) next = out.op("IfMerge", {runs, next, node.inputs[2 + j]}, {{"if", AttrValue(node.label())}}, "", "kiln");
    rest.inputs.push_back(next);
  }
  // The next iteration's condition: the body's, where this iteration ran.
  if (!runs.empty()) rest.inputs[1] = out.op("And", {runs, it.outputs[0]});
  for (size_t s = 0; s < scans; ++s) parts.push_back(stack_part(out, it.outputs[1 + carried + s], 0));
  rest.attrs[kIteration] = AttrValue(k + 1);
  rest.attrs[kScanParts] = AttrValue(parts);
  for (Node& n : out.nodes()) nodes.push_back(std::move(n));
  nodes.push_back(std::move(rest));
  replace_node(g, index, nodes);
}

void unroll_scan(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  if (node.opset < 9) return scan8_as_scans_per_row(g, index);
  const Graph& body = subgraph_attr(node, "body");
  const int64_t num_scan = node.required_int("num_scan_inputs");
  if (num_scan < 1 || static_cast<size_t>(num_scan) > node.inputs.size())
    throw Error(node.label() + ": attribute 'num_scan_inputs' is " + std::to_string(num_scan) + " for " +
                std::to_string(node.inputs.size()) + " inputs");
  const size_t states = node.inputs.size() - static_cast<size_t>(num_scan);
  if (body.outputs.size() < states) throw Error(node.label() + ": its body has fewer outputs than state variables");
  const size_t scan_outputs = body.outputs.size() - states;
  auto per_input = [&](const char* attr, size_t count) {
    std::vector<int64_t> v = node.attr_ints(attr, std::vector<int64_t>(count, 0));
    if (v.size() != count)
      throw Error(node.label() + ": attribute '" + attr + "' has " + std::to_string(v.size()) + " values, expected " +
                  std::to_string(count));
    return v;
  };
  std::vector<int64_t> in_axes = per_input("scan_input_axes", static_cast<size_t>(num_scan));
  const std::vector<int64_t> in_dirs = per_input("scan_input_directions", static_cast<size_t>(num_scan));
  std::vector<int64_t> out_axes = per_input("scan_output_axes", scan_outputs);
  const std::vector<int64_t> out_dirs = per_input("scan_output_directions", scan_outputs);

  // The sequence length: every scan input's extent along its axis.
  int64_t length = -1;
  for (size_t i = 0; i < static_cast<size_t>(num_scan); ++i) {
    const Value& x = g.value(node.inputs[states + i]);
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    int64_t& a = in_axes[i];
    if (a < -rank || a >= rank) throw Error(node.label() + ": scan_input_axes[" + std::to_string(i) + "] is out of range");
    if (a < 0) a += rank;
    const int64_t extent = x.shape[static_cast<size_t>(a)];
    if (length >= 0 && extent != length)
      throw Error(node.label() + ": its scan inputs have lengths " + std::to_string(length) + " and " + std::to_string(extent));
    length = extent;
  }
  if (length == 0) throw Unsupported(node.label() + ": a sequence of length 0 leaves its outputs without a shape");
  if (length > kMaxUnrolledIterations)
    throw Unsupported(node.label() + ": scans " + std::to_string(length) + " elements, more than the " +
                      std::to_string(kMaxUnrolledIterations) + " kiln unrolls");

  check_expansion(g, static_cast<size_t>(length) * (body.nodes.size() + 2 * static_cast<size_t>(num_scan)), node.label());
  NodeEmitter out(g, node);
  std::vector<Node> nodes;
  std::vector<std::string> state(node.inputs.begin(), node.inputs.begin() + static_cast<std::ptrdiff_t>(states));
  std::vector<std::vector<std::string>> stacked(scan_outputs);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<std::string> bound = state;
    for (size_t i = 0; i < static_cast<size_t>(num_scan); ++i) {
      const int64_t at = in_dirs[i] ? length - 1 - t : t;
      bound.push_back(out.op("Gather", {node.inputs[states + i], out.int64(at)}, {{"axis", AttrValue(in_axes[i])}}));
    }
    SplicedSubgraph it = splice_subgraph(g, body, node.name + "/iter" + std::to_string(t) + "/", node.guards, bound, node.label());
    for (Node& n : out.nodes()) nodes.push_back(std::move(n));
    out.nodes().clear();
    for (Node& n : it.nodes) nodes.push_back(std::move(n));
    state.assign(it.outputs.begin(), it.outputs.begin() + static_cast<std::ptrdiff_t>(states));
    for (size_t j = 0; j < scan_outputs; ++j) stacked[j].push_back(it.outputs[states + j]);
  }
  for (size_t j = 0; j < states && j < node.outputs.size(); ++j)
    if (!node.outputs[j].empty()) out.op("Identity", {state[j]}, {}, node.outputs[j]);
  for (size_t j = 0; j < scan_outputs && states + j < node.outputs.size(); ++j) {
    const std::string& o = node.outputs[states + j];
    if (o.empty()) continue;
    // Unsqueeze and Concat read a negative axis against the stacked rank, as scan_output_axes is.
    const int64_t axis = out_axes[j];
    std::vector<std::string> parts;
    for (const std::string& v : stacked[j]) parts.push_back(stack_part(out, v, axis));
    if (out_dirs[j]) std::reverse(parts.begin(), parts.end());
    out.op("Concat", parts, {{"axis", AttrValue(axis)}}, o);
  }
  for (Node& n : out.nodes()) nodes.push_back(std::move(n));
  replace_node(g, index, nodes);
}

}  // namespace kiln
