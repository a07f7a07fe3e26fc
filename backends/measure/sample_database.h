/// \file The record database: measured programs' features kept beside their records, so that tuning a
/// new model starts with a cost model trained on other models' programs (issue 18, "learning across
/// models").
///
/// The cost model learns from a program's feature rows (scheduler/search/features.h), which say
/// nothing about its task's shape, so programs of one model teach it about another's. A record alone
/// cannot give them back: its steps replay only on its task's DAG, which the record does not carry.
/// So `kiln tune` appends each measured program's rows to `RECORDS.features` beside the records file
/// (JSON lines, docs/records.md), and `kiln tune --database DIR` reads every such file under DIR and
/// trains the model on them before its first round.
#pragma once
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "scheduler/search/cost_model.h"

namespace kiln::measure {

/// The sidecar of a records file: `records` + ".features".
std::string features_path(const std::string& records);

/// One line (no newline) of a features file: a measured program of task `task_key` on `target`, its
/// feature rows and seconds per run (infinity: it failed, written as null).
std::string sample_line(const std::string& task_key, const std::string& target, const search::ProgramFeatures& features,
                        double cost_s);

/// What a database holds for one target.
struct SampleDatabase {
  std::vector<search::MeasuredSample> samples;
  size_t tasks = 0;    ///< distinct task keys among the samples
  size_t files = 0;    ///< features files read
  size_t skipped = 0;  ///< lines that did not decode, or rows of another feature version or width
};

/// The samples on `target` of every features file at `path` (a file, or a directory searched
/// recursively for *.features), except those of the tasks in `exclude` (the tuned model's own, which
/// its records restore). At most `limit` samples, drawn evenly across tasks (each task's fastest first)
/// so that one big model does not drown the others and retraining stays fast. A path that does not
/// exist or cannot be read is a kiln::Error naming it; undecodable lines are counted, and one warning
/// per file goes to `warnings`.
SampleDatabase load_sample_database(const std::string& path, const std::string& target,
                                    const std::set<std::string>& exclude, size_t limit,
                                    std::ostream& warnings = std::cerr);

}  // namespace kiln::measure
