/// \file Reading and writing tuning record lines (docs/records.md): the tuner appends one line per
/// measured candidate, `kiln measure` and `kiln compile --records` read them back. Beside the builder
/// rather than in scheduler/ because a record names its target (targets/), which the scheduler does not
/// depend on.
#pragma once
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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
  /// The time of kiln's default schedule (no steps; key "kiln_default" in the line, which TVM's
  /// readers ignore): compile --records uses a tuned record only when it beats this.
  bool default_schedule = false;
  /// Nonzero: the record re-measures a finalist of its task after tuning (key "kiln_final"), and this
  /// number names that re-measurement (its start, Unix seconds). The records of a task's latest
  /// re-measurement rank before all others: they were timed side by side, in turns, at one moment,
  /// where the search's times come from whatever load the machine had in their round.
  int64_t final_batch = 0;
  /// How much slower than its best time the task's reference program (its default schedule) ran in the
  /// round that measured this record (key "kiln_reference_drift"); 0 when that round did not time it.
  /// Over 1.1: the round ran on a loaded or throttled machine (docs/tuning.md).
  double reference_drift = 0;
};

/// The hardware numbers of a record, in TVM's order (cores, vector bytes, cache line bytes, then the
/// GPU limits, 0 on a CPU).
std::vector<int64_t> record_hardware(const Target& target);

/// One record as a JSON line (no newline).
std::string record_line(const std::string& task_key, const Target& target, const state::State& state,
                        const MeasureResult& result, bool default_schedule = false, int64_t final_batch = 0,
                        double reference_drift = 0);

/// A decoded record as a JSON line again (no newline), with its steps and hardware as they were read:
/// `kiln records distill` rewrites records without a DAG to replay them on.
std::string record_line(const Record& r);

/// Appends record lines (record_line's, no newlines) to `path` (created if missing) in one write, then
/// fsyncs, so a tuner killed at any moment loses at most the batch it was writing. A file whose last
/// line was cut short by such a kill gets a newline first, so the cut line stays one malformed line
/// (skipped by load_records) instead of swallowing the first new record. Throws kiln::Error naming the
/// path on I/O failure.
void append_record_lines(const std::string& path, const std::vector<std::string>& lines);

/// Replaces `path` with exactly these lines, so that a reader sees either the old file or the whole new
/// one: written to a temporary file beside it, fsynced, then renamed over it (`kiln records distill`,
/// which may distill a log into itself). Throws kiln::Error naming the path.
void write_record_lines(const std::string& path, const std::vector<std::string>& lines);

/// append_record_lines with one record.
void append_record(const std::string& path, const std::string& task_key, const Target& target,
                   const state::State& state, const MeasureResult& result);

/// Records nest a few levels (a step holds lists of lengths); a line nested deeper is refused unparsed.
inline constexpr int kMaxRecordNesting = 64;

/// Decodes one line; throws kiln::Error naming the missing or malformed field.
Record parse_record(const std::string& line);

/// Every record of a records file, in file order. A tuner killed mid-append leaves a truncated last
/// line and a log may pick up garbage, so a line that does not decode is skipped rather than fatal; the
/// file then gets ONE warning on `warnings` ("kiln: warning: PATH: skipped N malformed record line(s)
/// (first at line L)") so a damaged log is noticed without flooding the terminal. Blank lines are
/// ignored. Throws kiln::Error naming the path when the file is missing or unreadable.
std::vector<Record> load_records(const std::string& path, std::ostream& warnings = std::cerr);

/// A record whose time can be trusted: no error, at least one cost, and a finite mean cost.
bool is_valid_record(const Record& r);

/// The mean of the record's costs in seconds (0 for none).
double mean_cost(const Record& r);

/// (task key, target name): a schedule is only comparable with schedules of the same workload on the
/// same target, so this is what "best" is taken over.
using RecordKey = std::pair<std::string, std::string>;

/// The valid record with the lowest mean cost per (task key, target); on a tie the earlier record
/// wins, so the result does not depend on anything but the log's order. Keys with no valid record are
/// absent.
std::map<RecordKey, Record> best_records(const std::vector<Record>& records);

/// Every valid record per (task key, target), fastest first (ties: earlier first): what a compile falls
/// back through when the best record does not replay on this kiln's DAG. When the key has records of a
/// finalists' re-measurement (final_batch), those of the latest one come first, fastest first.
std::map<RecordKey, std::vector<Record>> ranked_records(const std::vector<Record>& records);

/// Rebuilds a record's state by replaying its steps on `dag`'s initial state. Throws ScheduleError or
/// kiln::Error when a step does not read or apply.
state::State replay_record(const Record& r, std::shared_ptr<const te::ComputeDAG> dag);

}  // namespace kiln::measure
