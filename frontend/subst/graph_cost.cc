#include "frontend/subst/graph_cost.h"

#include <algorithm>
#include <map>
#include <set>

#include "frontend/layout/block_layout.h"
#include "frontend/ops/shape_attributes.h"

namespace kiln::subst {
namespace {

double elements(const Graph& g, const std::string& v) {
  return v.empty() ? 0.0 : static_cast<double>(num_elements(g.value(v).shape));
}

double bytes_of(const Graph& g, const std::string& v) {
  if (v.empty()) return 0;
  const Value& value = g.value(v);
  return elements(g, v) * static_cast<double>(std::max<size_t>(dtype_size(value.dtype), 1));
}

// Multiply-adds x 2 of the compute-heavy ops; one operation per output element for the rest.
double flops_of(const Graph& g, const Node& n) {
  const double out = elements(g, n.outputs[0]);
  if (n.op_type == "Conv" && n.inputs.size() >= 2) {
    const Shape& w = g.value(n.inputs[1]).shape;
    double taps = 1;
    for (size_t a = 1; a < w.size(); ++a) taps *= static_cast<double>(w[a]);  // channels per group x kernel
    return 2 * out * taps;
  }
  if ((n.op_type == "MatMul" || n.op_type == "Gemm") && n.inputs.size() >= 2) {
    const Shape& a = g.value(n.inputs[0]).shape;
    const double k = a.empty() ? 1 : static_cast<double>(n.op_type == "Gemm" && n.attr_int("transA", 0) ? a[0] : a.back());
    return 2 * out * k;
  }
  return out;
}

// Whether Slice n cuts the channels of a feature map (N x C x spatial...) where the layout stage
// cannot keep it on its blocks: the whole is reordered out of the blocks, and the part back in by
// its reader.
bool cuts_channel_blocks(const Graph& g, const Node& n, int64_t block) {
  if (block <= 1 || n.op_type != "Slice" || n.inputs.empty() || g.value(n.inputs[0]).shape.size() < 3) return false;
  const std::optional<std::pair<int64_t, int64_t>> run = slice_run_along(g, n, 1);
  return run && !channel_slice_stays_blocked(run->first, run->second, g.value(n.inputs[0]).shape[1], block);
}

// A Slice or Concat on an axis before which every extent is 1 moves one contiguous run
// per part: kiln places the parts inside the whole (scheduler/lower/in_place_concat.h) and runs no
// code for it; but a part that is itself a Slice's output lies within that Slice's input already,
// so a Concat of it copies (kiln fuses the Slice into the Concat's copy).
bool runs_in_place(const Graph& g, const Node& n, const std::set<std::string>& slice_outputs) {
  if (n.op_type == "Slice") return contiguous_slice_offset(g, n).has_value();
  if (n.op_type != "Concat") return false;
  for (const std::string& in : n.inputs)
    if (slice_outputs.count(in)) return false;
  const Shape& whole = g.value(n.outputs[0]).shape;
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(whole.size());
  for (int64_t a = 0; a < axis && a < static_cast<int64_t>(whole.size()); ++a)
    if (whole[static_cast<size_t>(a)] != 1) return false;
  return true;
}

}  // namespace

bool reshapes_or_moves(const std::string& op_type) {
  static const std::set<std::string> ops = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice"};
  return ops.count(op_type) != 0;
}

Roofline roofline_for(int vector_bits, int cores) {
  const double lanes = std::max(vector_bits, 128) / 32.0;
  const double c = std::max(cores, 1);
  return {c * lanes * 2 /*FMA*/ * 2 /*pipes*/ * 3e9, c * 10e9, 1e-6, float_block_for(vector_bits)};
}

bool is_elementwise(const Node& n) {
  static const std::set<std::string> ops = {"Relu", "Add", "Sub", "Mul", "Div", "Clip", "Sigmoid", "Tanh", "LeakyRelu",
                                            "Max", "Min", "Erf", "HardSigmoid", "HardSwish", "Neg", "Sqrt", "Exp"};
  return n.domain.empty() && ops.count(n.op_type);
}

namespace {

// What `n` is to an epilogue, given the values computed in epilogues so far: a conv or matmul
// starts one, an element-wise op reading such a value continues it (partition.h's phase 0).
enum class Epilogue { None, Anchor, Fused };
Epilogue epilogue_role(const Node& n, const std::set<std::string>& fused) {
  if (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm") return Epilogue::Anchor;
  const bool reads_one =
      std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& in) { return fused.count(in) != 0; });
  return is_elementwise(n) && reads_one ? Epilogue::Fused : Epilogue::None;
}

// Whether every input of `n` is a constant or in `constant` (computed from constants alone); if so,
// `n`'s outputs join `constant`: they fold before run time.
bool folds_from_constants(const Graph& g, const Node& n, std::set<std::string>& constant) {
  const bool of_constants = std::all_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& in) {
    return in.empty() || g.value(in).constant || constant.count(in);
  });
  if (of_constants) constant.insert(n.outputs.begin(), n.outputs.end());
  return of_constants;
}

// One node's estimate; `constant` holds the values computed from constants alone so far, `fused`
// the values computed in the epilogue of a conv or matmul (partition.h's phase 0: an anchor absorbs
// the element-wise chain after it, so the chain costs no pass over memory of its own).
double node_cost(const Graph& g, const Node& n, const Roofline& r, std::set<std::string>& constant,
                 const std::set<std::string>& slice_outputs, std::set<std::string>& fused,
                 const std::set<std::string>& moved_slices) {
  static const std::set<std::string> views = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Shape"};
  const bool of_constants = folds_from_constants(g, n, constant);
  if (!of_constants && cuts_channel_blocks(g, n, r.channel_block))  // out of the blocks and back: two passes, twice
    return 4 * bytes_of(g, n.outputs[0]) / r.bytes_per_second + 2 * r.seconds_per_node;
  if (of_constants || n.outputs.empty() || views.count(n.op_type) || runs_in_place(g, n, slice_outputs)) return 0;
  if (n.op_type == "Slice" && moved_slices.count(n.outputs[0])) return 0;  // read by a reshape or move: one pass with it
  const Epilogue role = epilogue_role(n, fused);
  if (role != Epilogue::None) fused.insert(n.outputs[0]);
  if (role == Epilogue::Fused) return 0;
  double bytes = 0;
  for (const std::string& o : n.outputs) bytes += bytes_of(g, o);
  if (n.op_type == "Slice") bytes *= 2;  // reads only what it keeps
  else
    for (const std::string& in : n.inputs) bytes += bytes_of(g, in);
  return std::max(flops_of(g, n) / r.flops_per_second, bytes / r.bytes_per_second) + r.seconds_per_node;
}

}  // namespace

std::set<std::string> slices_read_by_moves(const Graph& g) {
  std::map<std::string, bool> all_moves;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs) {
      auto [it, fresh] = all_moves.try_emplace(in, true);
      it->second = it->second && reshapes_or_moves(n.op_type);
    }
  for (const std::string& o : g.outputs) all_moves[o] = false;
  std::set<std::string> out;
  for (const Node& n : g.nodes)
    if (n.op_type == "Slice" && !n.outputs.empty())
      if (auto it = all_moves.find(n.outputs[0]); it != all_moves.end() && it->second) out.insert(n.outputs[0]);
  return out;
}

double graph_cost(const Graph& g, const Roofline& r) { return graph_cost(g, r, slices_read_by_moves(g)); }

std::set<std::string> epilogue_values(const Graph& g) {
  std::set<std::string> fused;
  for (const Node& n : g.nodes)
    if (!n.outputs.empty() && epilogue_role(n, fused) != Epilogue::None) fused.insert(n.outputs[0]);
  return fused;
}

double graph_cost(const Graph& g, const Roofline& r, const std::set<std::string>& moved_slices,
                  const std::set<std::string>& folded) {
  double seconds = 0;
  std::set<std::string> constant = folded;  // values computed from constants alone: folded before run time
  std::set<std::string> slice_outputs, fused;
  for (const Node& n : g.nodes) {
    seconds += node_cost(g, n, r, constant, slice_outputs, fused, moved_slices);
    if (n.op_type == "Slice" && !n.outputs.empty()) slice_outputs.insert(n.outputs[0]);
  }
  return seconds;
}

std::set<std::string> values_of_constants(const Graph& g) {
  std::set<std::string> constant;
  for (const Node& n : g.nodes) folds_from_constants(g, n, constant);
  return constant;
}

double nodes_cost(const Graph& g, const std::vector<const Node*>& nodes, const Roofline& r,
                  const std::set<std::string>& slice_outputs, const std::set<std::string>& fused_values) {
  double seconds = 0;
  std::set<std::string> constant, fused = fused_values;
  for (const Node* n : nodes) seconds += node_cost(g, *n, r, constant, slice_outputs, fused, {});
  return seconds;
}

}  // namespace kiln::subst
