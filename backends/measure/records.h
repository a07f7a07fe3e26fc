/// \file Reading and writing tuning record lines (docs/records.md): the tuner appends one line per
/// measured candidate, `kiln measure` and `kiln compile --records` read them back. Beside the builder
/// rather than in scheduler/ because a record names its target (targets/), which the scheduler does not
/// depend on.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scheduler/measure/measure.h"
#include "scheduler/state/state.h"
#include "targets/target.h"

namespace kiln::measure {

/// One record line, decoded. The steps are kept as JSON until a DAG is at hand to replay them on
/// (a record does not carry its DAG).
struct Record {
  std::string task_key;
  std::string target;
  std::vector<int64_t> hardware;
  nlohmann::json steps = nlohmann::json::array();
  MeasureResult result;
};

/// The hardware numbers of a record, in TVM's order (cores, vector bytes, cache line bytes, then the
/// GPU limits, 0 on a CPU).
std::vector<int64_t> record_hardware(const Target& target);

/// One record as a JSON line (no newline).
std::string record_line(const std::string& task_key, const Target& target, const state::State& state,
                        const MeasureResult& result);

/// Appends one record line to `path` (created if missing), then flushes and fsyncs it, so a tuner that
/// is killed loses at most the line it was writing. Throws kiln::Error naming the path on I/O failure.
void append_record(const std::string& path, const std::string& task_key, const Target& target,
                   const state::State& state, const MeasureResult& result);

/// Decodes one line; throws kiln::Error naming the missing or malformed field.
Record parse_record(const std::string& line);

/// Rebuilds a record's state by replaying its steps on `dag`'s initial state. Throws ScheduleError or
/// kiln::Error when a step does not read or apply.
state::State replay_record(const Record& r, std::shared_ptr<const te::ComputeDAG> dag);

}  // namespace kiln::measure
