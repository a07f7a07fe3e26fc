/// \file The measurement vocabulary shared by the builder (backends/measure/program_builder.h), the
/// runners (local process and RPC) and the tuning records: what is measured, what a build produced, what
/// a run measured, and why a candidate failed. The search only sees these types, so it never depends on
/// how or where a program is compiled and timed.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/ir/dtype.h"
#include "scheduler/state/state.h"
#include "scheduler/te/compute.h"

namespace kiln::lower {
struct LoweredFunc;
}

namespace kiln::measure {

/// Why a candidate has no time. Numbered as TVM's MeasureErrorNO so records read the same; a record
/// keeps the number, so never renumber.
enum class MeasureError {
  None = 0,
  Instantiation = 1,   // the state does not lower (an unchosen split length, a failing step)
  CompileHost = 2,     // code generation, the object file or linking the shared object failed
  CompileDevice = 3,   // a device compiler (ptxas) rejected the kernel
  RuntimeDevice = 4,   // the program crashed or the device reported an error while running it
  WrongAnswer = 5,     // its outputs differ from the reference
  BuildTimeout = 6,    // building took longer than the builder's time limit
  RunTimeout = 7,      // running took longer than the runner's time limit
  Unknown = 8,         // anything else (a builder worker that died without saying why)
  /// The device or the session to it went away before the program's result came back (a board that
  /// rebooted, a dropped connection, no device to lease): no fact about the program. The tuner measures
  /// it again later and neither counts nor records it.
  DeviceLost = 9,
};

/// "none", "instantiation", "compile-host", ..., as records and tables print them.
const char* measure_error_name(MeasureError e);
/// The inverse of measure_error_name; nullopt for an unknown name.
std::optional<MeasureError> parse_measure_error(std::string_view name);
/// A record's number -> the code; numbers outside 0..8 become Unknown (a newer writer's code).
MeasureError measure_error_from_int(int v);

/// One candidate to measure: the task it belongs to (its workload key, for records and messages), the
/// task's DAG (shared by every candidate of the task) and the schedule.
struct MeasureInput {
  std::string task_key;
  std::shared_ptr<const te::ComputeDAG> dag;
  state::State state;
  /// When > 0: a candidate whose first call takes longer than this many seconds is timed by that call
  /// alone, and one still running after 4x this + 1 s is a RunTimeout. The tuner sets it to 20x the
  /// best time known for the task (at least 50 ms), so hopeless candidates cost one call instead of all
  /// repeats (random programs of one task can differ 400x).
  double slow_call_s = 0;
  /// Measure kiln's default schedule of the DAG (lower_dag) instead of `state` (which is then the
  /// initial state): the baseline a tuned program must beat to be used (docs/tuning.md).
  bool default_schedule = false;
};

/// What a buffer of the built function is for: a runner fills inputs with random data, compares
/// outputs with the reference and only allocates temporaries.
enum class BufferRole { Input, Output, Temp };
const char* buffer_role_name(BufferRole r);  // "input", "output", "temp"

/// One parameter of the built function, in parameter order: `buffers[i]` must point at `bytes` bytes.
/// Inputs are the DAG's placeholders in order (weights included), then its distinct outputs in order,
/// then the temporaries that the state's root stages need.
struct BufferSpec {
  std::string name;
  int64_t bytes = 0;
  DType dtype = DType::Float32;
  BufferRole role = BufferRole::Input;
};

/// The parameters of a lowered state function (lower::lower_state_func) with their roles.
std::vector<BufferSpec> buffer_specs(const lower::LoweredFunc& f, const te::ComputeDAG& dag);

/// One candidate's build: a fully linked shared object exporting
///   void <func_name>(void** buffers, void* parallel)
/// (parallel may be null: parallel loops then run serially), or the error that prevented it.
struct BuildResult {
  std::string so_path;    // empty when error != None
  std::string func_name;
  std::vector<BufferSpec> buffers;
  MeasureError error = MeasureError::None;
  std::string error_msg;
  double time_s = 0;  // wall time of the build, lowering to linking
};

/// One candidate's measurement: seconds per repeat (empty when error != None).
struct MeasureResult {
  std::vector<double> costs;
  MeasureError error = MeasureError::None;
  std::string error_msg;
  double all_cost_s = 0;  // build + run wall time, what the tuner spent on this candidate
  double timestamp = 0;   // seconds since the epoch when the measurement finished
};

/// JSON forms: builder workers send BuildResults to the parent through a pipe, records store results.
/// Readers throw kiln::Error naming the missing or malformed field.
nlohmann::json to_json(const BuildResult& r);
BuildResult build_result_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MeasureResult& r);
MeasureResult measure_result_from_json(const nlohmann::json& j);

/// Compiles candidates into shared objects. The search holds this interface, so it does not depend on
/// LLVM; backends/measure/program_builder.h has the implementation that forks a worker per candidate.
class Builder {
 public:
  virtual ~Builder() = default;
  /// One result per input, in input order. A failing candidate yields an error result, never a throw.
  virtual std::vector<BuildResult> build(const std::vector<MeasureInput>& inputs) = 0;
};

}  // namespace kiln::measure
