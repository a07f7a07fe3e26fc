#include "frontend/ir/step_loop.h"

#include "frontend/ir/error.h"

namespace kiln {

bool is_step_loop(const Node& n) { return n.domain == "kiln" && n.op_type == "StepLoop"; }

StepLoop read_step_loop(const Node& n) {
  StepLoop loop;
  auto it = n.attrs.find("body");
  const auto* sub = it == n.attrs.end() ? nullptr : std::get_if<SubgraphAttr>(&it->second);
  if (!sub || !sub->graph) throw Error(n.label() + ": no body graph");
  loop.body = sub->graph;
  loop.trip_count = n.required_int("trip_count");
  loop.carried = n.attr_int("carried", 0);
  const Graph& body = *loop.body;
  const auto carried = static_cast<size_t>(loop.carried);
  if (loop.trip_count < 1) throw Error(n.label() + ": trip_count must be at least 1, got " + std::to_string(loop.trip_count));
  if (loop.carried < 0 || carried > n.inputs.size() || carried > body.outputs.size())
    throw Error(n.label() + ": " + std::to_string(loop.carried) + " carried values, but " + std::to_string(n.inputs.size()) +
                " inputs and " + std::to_string(body.outputs.size()) + " body outputs");
  if (body.inputs.size() != n.inputs.size() + 1)
    throw Error(n.label() + ": the body takes " + std::to_string(body.inputs.size()) + " inputs, the node gives " +
                std::to_string(n.inputs.size()) + " and the iteration");
  if (n.outputs.size() != body.outputs.size())
    throw Error(n.label() + ": " + std::to_string(n.outputs.size()) + " outputs but the body has " +
                std::to_string(body.outputs.size()));
  loop.scan_reverse = n.attr_ints("scan_reverse", std::vector<int64_t>(body.outputs.size() - carried, 0));
  if (loop.scan_reverse.size() != body.outputs.size() - carried)
    throw Error(n.label() + ": scan_reverse has " + std::to_string(loop.scan_reverse.size()) + " entries for " +
                std::to_string(body.outputs.size() - carried) + " scan outputs");
  loop.condition = n.attr_int("condition", 0) != 0;
  loop.trip_limit = n.attr_int("trip_limit", 0) != 0;
  if (loop.may_stop() && body.outputs.size() != carried)
    throw Error(n.label() + ": a loop whose iterations are decided at run time has no scan outputs");
  auto check_scalar = [&](const std::string& name, DType t, const char* what) {
    const Value& v = body.value(name);
    if (v.dtype != t || !v.shape.empty()) throw Error(n.label() + ": " + what + " must be a " + dtype_name(t) + " scalar");
  };
  if (loop.condition) {
    if (carried < 1) throw Error(n.label() + ": a loop with a condition carries it first");
    check_scalar(body.inputs[1], DType::Bool, "the condition (carried value 0)");
  }
  if (loop.trip_limit) {
    if (body.inputs.size() < carried + 2) throw Error(n.label() + ": a loop with a run-time trip count takes it first after the carried values");
    check_scalar(body.inputs[carried + 1], DType::Int64, "the run-time trip count");
  }
  const Value& iter = body.value(body.inputs[0]);
  if (iter.dtype != DType::Int64 || !iter.shape.empty()) throw Error(n.label() + ": the body's first input must be an int64 scalar");
  for (size_t i = 0; i < carried; ++i) {
    const Value& in = body.value(body.inputs[i + 1]);
    const Value& out = body.value(body.outputs[i]);
    if (in.dtype != out.dtype || in.shape != out.shape)
      throw Error(n.label() + ": carried value " + std::to_string(i) + " enters the body as " + dtype_name(in.dtype) + " " +
                  shape_str(in.shape) + " and leaves it as " + dtype_name(out.dtype) + " " + shape_str(out.shape));
  }
  return loop;
}

Node make_step_loop(const std::string& name, const StepLoop& loop, std::vector<std::string> inputs,
                    std::vector<std::string> outputs) {
  Node n;
  n.name = name;
  n.op_type = "StepLoop";
  n.domain = "kiln";
  n.opset = 1;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attrs["body"] = SubgraphAttr{loop.body};
  n.attrs["trip_count"] = AttrValue(loop.trip_count);
  n.attrs["carried"] = AttrValue(loop.carried);
  n.attrs["scan_reverse"] = AttrValue(loop.scan_reverse);
  if (loop.condition) n.attrs["condition"] = AttrValue(int64_t{1});
  if (loop.trip_limit) n.attrs["trip_limit"] = AttrValue(int64_t{1});
  return n;
}

}  // namespace kiln
