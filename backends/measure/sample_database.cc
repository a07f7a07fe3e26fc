// The features sidecar of a records file: writer and database reader.
#include "backends/measure/sample_database.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "frontend/ir/error.h"
#include "scheduler/search/features.h"

namespace kiln::measure {
namespace {

namespace fs = std::filesystem;

// A value as written: 6 significant digits (the features are log2-scaled counts; more digits would
// triple the file for nothing the model can use).
double rounded(float v) {
  if (v == 0 || !std::isfinite(v)) return 0;
  const double scale = std::pow(10.0, 5 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

// Reads one file's samples on `target` into `by_task`; returns the lines skipped.
size_t read_file(const fs::path& file, const std::string& target, const std::set<std::string>& exclude,
                 std::map<std::string, std::vector<search::MeasuredSample>>& by_task, std::ostream& warnings) {
  std::ifstream in(file);
  if (!in) throw Error("database " + file.string() + ": cannot read");
  size_t skipped = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.at("v").get<int>() != search::kFeatureVersion) {
        ++skipped;
        continue;
      }
      const std::string key = j.at("k").get<std::string>();
      if (j.at("t").get<std::string>() != target || exclude.count(key)) continue;
      search::MeasuredSample s;
      s.task_key = key;
      s.cost_s = j.at("c").is_null() ? std::numeric_limits<double>::infinity() : j.at("c").get<double>();
      if (!(s.cost_s > 0)) throw Error("not a time");
      s.features = j.at("f").get<search::ProgramFeatures>();
      for (const std::vector<float>& row : s.features)
        if (row.size() != static_cast<size_t>(search::kFeaturesPerStore)) throw Error("row width");
      by_task[key].push_back(std::move(s));
    } catch (const std::exception&) {  // JSON errors and the checks above: the line is not a sample
      ++skipped;
    }
  }
  if (skipped > 0)
    warnings << "kiln: warning: " << file.string() << ": skipped " << skipped
             << " line(s) that are not samples of this kiln's features\n";
  return skipped;
}

}  // namespace

std::string features_path(const std::string& records) { return records + ".features"; }

std::string sample_line(const std::string& task_key, const std::string& target, const search::ProgramFeatures& features,
                        double cost_s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const std::vector<float>& row : features) {
    nlohmann::json r = nlohmann::json::array();
    for (float v : row) r.push_back(rounded(v));
    rows.push_back(std::move(r));
  }
  nlohmann::json j;
  j["k"] = task_key;
  j["t"] = target;
  j["v"] = search::kFeatureVersion;
  j["c"] = std::isfinite(cost_s) && cost_s > 0 ? nlohmann::json(cost_s) : nlohmann::json(nullptr);
  j["f"] = std::move(rows);
  return j.dump();
}

SampleDatabase load_sample_database(const std::string& path, const std::string& target,
                                    const std::set<std::string>& exclude, size_t limit, std::ostream& warnings) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("database " + path + ": no such file or directory");
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file() && it->path().extension() == ".features") files.push_back(it->path());
    if (ec) throw Error("database " + path + ": cannot list (" + ec.message() + ")");
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  SampleDatabase db;
  std::map<std::string, std::vector<search::MeasuredSample>> by_task;
  for (const fs::path& f : files) db.skipped += read_file(f, target, exclude, by_task, warnings);
  db.files = files.size();
  db.tasks = by_task.size();
  // An even share per task; within a task, samples evenly spaced over its ranking from the fastest, so
  // the model still sees how much slower the slow programs are (its labels are each task's best / cost).
  const size_t share = by_task.empty() ? 0 : std::max<size_t>(1, limit / by_task.size());
  for (auto& [key, list] : by_task) {
    std::stable_sort(list.begin(), list.end(),
                     [](const search::MeasuredSample& a, const search::MeasuredSample& b) { return a.cost_s < b.cost_s; });
    const size_t take = std::min(share, list.size());
    for (size_t i = 0; i < take; ++i) db.samples.push_back(std::move(list[i * list.size() / take]));
  }
  if (db.samples.size() > limit) db.samples.resize(limit);
  return db;
}

}  // namespace kiln::measure
