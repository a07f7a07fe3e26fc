#include "scheduler/measure/measure.h"

#include <array>
#include <set>

#include "frontend/ir/error.h"
#include "scheduler/lower/loop_ir.h"

namespace kiln::measure {
namespace {

constexpr std::array<const char*, 10> kErrorNames = {"none",           "instantiation",  "compile-host",
                                                     "compile-device", "runtime-device", "wrong-answer",
                                                     "build-timeout",  "run-timeout",    "unknown",
                                                     "device-lost"};

// A required field of a JSON object, with a message naming it when it is missing or has the wrong type.
template <typename T>
T field(const nlohmann::json& j, const char* object, const char* name) {
  if (!j.is_object() || !j.contains(name)) throw Error(std::string(object) + " JSON: missing field '" + name + "'");
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(std::string(object) + " JSON: field '" + name + "' has the wrong type");
  }
}

BufferRole parse_role(const std::string& s) {
  for (BufferRole r : {BufferRole::Input, BufferRole::Output, BufferRole::Temp})
    if (s == buffer_role_name(r)) return r;
  throw Error("BuildResult JSON: unknown buffer role '" + s + "'");
}

}  // namespace

const char* measure_error_name(MeasureError e) {
  const auto i = static_cast<size_t>(e);
  return i < kErrorNames.size() ? kErrorNames[i] : "unknown";
}

std::optional<MeasureError> parse_measure_error(std::string_view name) {
  for (size_t i = 0; i < kErrorNames.size(); ++i)
    if (name == kErrorNames[i]) return static_cast<MeasureError>(i);
  return std::nullopt;
}

MeasureError measure_error_from_int(int v) {
  return v >= 0 && v < static_cast<int>(kErrorNames.size()) ? static_cast<MeasureError>(v) : MeasureError::Unknown;
}

const char* buffer_role_name(BufferRole r) {
  switch (r) {
    case BufferRole::Input: return "input";
    case BufferRole::Output: return "output";
    case BufferRole::Temp: return "temp";
  }
  return "?";
}

std::vector<BufferSpec> buffer_specs(const lower::LoweredFunc& f, const te::ComputeDAG& dag) {
  // lower_state_func's order: placeholders, the distinct outputs, then temporaries.
  std::set<const te::TensorNode*> outputs;
  for (const te::TensorRef& o : dag.outputs) outputs.insert(o.get());
  const size_t n_inputs = dag.placeholders.size(), n_outputs = outputs.size();
  if (f.params.size() < n_inputs + n_outputs)
    throw Error("measure: function " + f.name + " has fewer parameters than the DAG has placeholders and outputs");
  std::vector<BufferSpec> specs;
  for (size_t i = 0; i < f.params.size(); ++i) {
    const lower::Buffer& b = *f.params[i];
    BufferSpec s;
    s.name = b.name;
    s.dtype = b.dtype;
    s.bytes = b.size * static_cast<int64_t>(dtype_size(b.dtype));
    s.role = i < n_inputs ? BufferRole::Input : i < n_inputs + n_outputs ? BufferRole::Output : BufferRole::Temp;
    specs.push_back(std::move(s));
  }
  return specs;
}

nlohmann::json to_json(const BuildResult& r) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const BufferSpec& b : r.buffers)
    buffers.push_back({{"name", b.name}, {"bytes", b.bytes}, {"dtype", static_cast<int32_t>(b.dtype)},
                       {"role", buffer_role_name(b.role)}});
  return {{"so_path", r.so_path},   {"func_name", r.func_name}, {"buffers", buffers},
          {"error", static_cast<int>(r.error)}, {"error_msg", r.error_msg}, {"time_s", r.time_s}};
}

BuildResult build_result_from_json(const nlohmann::json& j) {
  BuildResult r;
  r.so_path = field<std::string>(j, "BuildResult", "so_path");
  r.func_name = field<std::string>(j, "BuildResult", "func_name");
  r.error = measure_error_from_int(field<int>(j, "BuildResult", "error"));
  r.error_msg = field<std::string>(j, "BuildResult", "error_msg");
  r.time_s = field<double>(j, "BuildResult", "time_s");
  const nlohmann::json buffers = field<nlohmann::json>(j, "BuildResult", "buffers");
  if (!buffers.is_array()) throw Error("BuildResult JSON: field 'buffers' is not an array");
  for (const nlohmann::json& b : buffers) {
    BufferSpec s;
    s.name = field<std::string>(b, "BufferSpec", "name");
    s.bytes = field<int64_t>(b, "BufferSpec", "bytes");
    s.dtype = dtype_from_int(field<int32_t>(b, "BufferSpec", "dtype"));
    s.role = parse_role(field<std::string>(b, "BufferSpec", "role"));
    r.buffers.push_back(std::move(s));
  }
  return r;
}

nlohmann::json to_json(const MeasureResult& r) {
  return {{"costs", r.costs},         {"error", static_cast<int>(r.error)}, {"error_msg", r.error_msg},
          {"all_cost_s", r.all_cost_s}, {"timestamp", r.timestamp}};
}

MeasureResult measure_result_from_json(const nlohmann::json& j) {
  MeasureResult r;
  r.costs = field<std::vector<double>>(j, "MeasureResult", "costs");
  r.error = measure_error_from_int(field<int>(j, "MeasureResult", "error"));
  r.error_msg = field<std::string>(j, "MeasureResult", "error_msg");
  r.all_cost_s = field<double>(j, "MeasureResult", "all_cost_s");
  r.timestamp = field<double>(j, "MeasureResult", "timestamp");
  return r;
}

}  // namespace kiln::measure
