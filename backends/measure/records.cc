// Record lines: the writer (append + fsync) and the reader.
#include "backends/measure/records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>

#include "frontend/ir/error.h"
#include "scheduler/state/step.h"

namespace kiln::measure {
namespace {

const nlohmann::json& at(const nlohmann::json& j, size_t i, const char* what) {
  if (!j.is_array() || i >= j.size()) throw Error(std::string("record: missing ") + what);
  return j[i];
}

nlohmann::json record_json(const std::string& task_key, const std::string& target, const std::vector<int64_t>& hardware,
                           const nlohmann::json& steps, const MeasureResult& result, bool default_schedule,
                           int64_t final_batch, double reference_drift) {
  nlohmann::json j;
  j["i"] = nlohmann::json::array({nlohmann::json::array({task_key, target, hardware}),
                                  nlohmann::json::array({nlohmann::json::array(), steps})});
  j["r"] = nlohmann::json::array({result.costs, static_cast<int>(result.error), result.all_cost_s, result.timestamp});
  j["v"] = "v0.6";
  if (default_schedule) j["kiln_default"] = true;
  if (final_batch != 0) j["kiln_final"] = final_batch;
  if (reference_drift > 0) j["kiln_reference_drift"] = reference_drift;
  return j;
}

}  // namespace

std::vector<int64_t> record_hardware(const Target& target) {
  const GpuLimits gpu = target.gpu.value_or(GpuLimits{});
  return {target.cores, target.vector_bits / 8, 64, gpu.shared_memory_bytes, 0, gpu.max_threads_per_block, 0,
          gpu.warp_size};
}

std::string record_line(const std::string& task_key, const Target& target, const state::State& state,
                        const MeasureResult& result, bool default_schedule, int64_t final_batch, double reference_drift) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : state.steps()) steps.push_back(s->to_json());
  return record_json(task_key, target.name, record_hardware(target), steps, result, default_schedule, final_batch,
                     reference_drift)
      .dump();
}

std::string record_line(const Record& r) {
  return record_json(r.task_key, r.target, r.hardware, r.steps, r.result, r.default_schedule, r.final_batch,
                     r.reference_drift)
      .dump();
}

namespace {

// Writes all of `text` to `fd`; "" or why not.
std::string write_fully(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::strerror(errno);
    done += static_cast<size_t>(n);
  }
  return "";
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) {
    text.append(l);
    text.push_back('\n');
  }
  return text;
}

}  // namespace

void append_record_lines(const std::string& path, const std::vector<std::string>& lines) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("records " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  char last = '\n';
  const bool cut_short =
      ::fstat(fd, &st) == 0 && st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
  const std::string why = write_fully(fd, (cut_short ? "\n" : "") + joined_lines(lines));
  const bool synced = why.empty() && ::fsync(fd) == 0;
  const std::string sync_why = synced ? "" : std::strerror(errno);
  ::close(fd);
  if (!why.empty()) throw Error("records " + path + ": write failed: " + why);
  if (!synced) throw Error("records " + path + ": fsync failed: " + sync_why);
}

void write_record_lines(const std::string& path, const std::vector<std::string>& lines) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("records " + path + ": cannot create " + tmp + ": " + std::strerror(errno));
  const std::string why = write_fully(fd, joined_lines(lines));
  const bool synced = why.empty() && ::fsync(fd) == 0;
  ::close(fd);
  if (!why.empty() || !synced || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = why.empty() ? std::strerror(errno) : why;
    ::unlink(tmp.c_str());
    throw Error("records " + path + ": cannot replace it: " + reason);
  }
}

void append_record(const std::string& path, const std::string& task_key, const Target& target,
                   const state::State& state, const MeasureResult& result) {
  append_record_lines(path, {record_line(task_key, target, state, result)});
}

namespace {

// The deepest nesting of arrays and objects in `line` (strings skipped). Records are untrusted input:
// a line nested 100,000 deep overflowed the stack in the JSON library's recursive copy and destruction,
// so such a line is refused before it is parsed.
int json_nesting(const std::string& line) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Record parse_record(const std::string& line) {
  if (json_nesting(line) > kMaxRecordNesting)
    throw Error("record: nested deeper than " + std::to_string(kMaxRecordNesting) + " levels");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("record: not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) throw Error("record: not a JSON object");
  try {
    Record r;
    const nlohmann::json& i = j.at("i");
    const nlohmann::json& task = at(i, 0, "i[0] (task)");
    r.task_key = at(task, 0, "i[0][0] (workload key)").get<std::string>();
    r.target = at(task, 1, "i[0][1] (target)").get<std::string>();
    if (task.size() > 2) r.hardware = task[2].get<std::vector<int64_t>>();
    r.steps = at(at(i, 1, "i[1] (state)"), 1, "i[1][1] (steps)");
    if (!r.steps.is_array()) throw Error("record: i[1][1] (steps) is not an array");
    const nlohmann::json& res = j.at("r");
    r.result.costs = at(res, 0, "r[0] (costs)").get<std::vector<double>>();
    r.result.error = measure_error_from_int(at(res, 1, "r[1] (error)").get<int>());
    r.result.all_cost_s = at(res, 2, "r[2] (all cost)").get<double>();
    r.result.timestamp = at(res, 3, "r[3] (timestamp)").get<double>();
    r.default_schedule = j.contains("kiln_default") && j["kiln_default"].is_boolean() && j["kiln_default"].get<bool>();
    if (j.contains("kiln_final") && j["kiln_final"].is_number_integer()) r.final_batch = j["kiln_final"].get<int64_t>();
    if (j.contains("kiln_reference_drift") && j["kiln_reference_drift"].is_number()) {
      r.reference_drift = j["kiln_reference_drift"].get<double>();
      if (!std::isfinite(r.reference_drift) || r.reference_drift < 0) r.reference_drift = 0;
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("record: malformed field (") + e.what() + ")");
  }
}

std::vector<Record> load_records(const std::string& path, std::ostream& warnings) {
  std::ifstream in(path);
  if (!in) throw Error("records " + path + ": cannot read (" + std::strerror(errno) + ")");
  std::vector<Record> out;
  int skipped = 0, first_skipped = 0;
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(parse_record(text));
    } catch (const Error&) {
      if (skipped++ == 0) first_skipped = n;
    }
  }
  if (in.bad()) throw Error("records " + path + ": read failed");
  if (skipped > 0)
    warnings << "kiln: warning: " << path << ": skipped " << skipped << " malformed record line(s) (first at line "
             << first_skipped << ")\n";
  return out;
}

double mean_cost(const Record& r) {
  if (r.result.costs.empty()) return 0;
  return std::accumulate(r.result.costs.begin(), r.result.costs.end(), 0.0) / static_cast<double>(r.result.costs.size());
}

// A measured time is finite and positive: a cost of -1 or 0 in a hand-edited or foreign log would
// otherwise win every comparison and be compiled as "the fastest program".
bool is_valid_record(const Record& r) {
  if (r.result.error != MeasureError::None || r.result.costs.empty()) return false;
  return std::all_of(r.result.costs.begin(), r.result.costs.end(), [](double c) { return std::isfinite(c) && c > 0; });
}

std::map<RecordKey, std::vector<Record>> ranked_records(const std::vector<Record>& records) {
  std::map<RecordKey, std::vector<Record>> ranked;
  for (const Record& r : records)
    if (is_valid_record(r)) ranked[RecordKey{r.task_key, r.target}].push_back(r);
  for (auto& [key, list] : ranked) {
    int64_t latest = 0;
    for (const Record& r : list) latest = std::max(latest, r.final_batch);
    std::stable_sort(list.begin(), list.end(), [&](const Record& a, const Record& b) {
      const bool fa = latest != 0 && a.final_batch == latest, fb = latest != 0 && b.final_batch == latest;
      if (fa != fb) return fa;
      return mean_cost(a) < mean_cost(b);
    });
  }
  return ranked;
}

std::map<RecordKey, Record> best_records(const std::vector<Record>& records) {
  std::map<RecordKey, Record> best;
  for (auto& [key, list] : ranked_records(records)) best.emplace(key, std::move(list.front()));
  return best;
}

state::State replay_record(const Record& r, std::shared_ptr<const te::ComputeDAG> dag) {
  std::vector<state::StepRef> steps;
  for (const nlohmann::json& s : r.steps) steps.push_back(state::step_from_json(s));
  return state::replay(std::move(dag), steps);
}

}  // namespace kiln::measure
