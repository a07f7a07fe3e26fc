#include "toolchain/stage_dump.h"

#include <algorithm>
#include <iostream>

#include "frontend/ir/error.h"

namespace kiln {

const std::vector<std::string>& pipeline_stages() {
  static const std::vector<std::string> stages = {
      "import", "bind", "infer", "prune", "qdq", "expand", "fold", "deconv", "subst", "layout", "partition",
      "tasks", "analysis", "sketch", "schedule", "lower", "memory", "codegen", "package"};
  return stages;
}

StageDump::StageDump(std::vector<std::string> stages, Sink sink) : stages_(std::move(stages)), sink_(std::move(sink)) {
  const auto& known = pipeline_stages();
  for (const std::string& s : stages_) {
    if (s == "all" || std::find(known.begin(), known.end(), s) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += k + "|";
    throw Error("--dump-after '" + s + "': expected " + list + "all");
  }
}

bool StageDump::wants(const std::string& stage) const {
  return std::find(stages_.begin(), stages_.end(), stage) != stages_.end() ||
         std::find(stages_.begin(), stages_.end(), "all") != stages_.end();
}

std::string StageDump::last_wanted() const {
  std::string last;
  for (const std::string& s : pipeline_stages())
    if (wants(s)) last = s;
  return last;
}

void StageDump::dump(const std::string& stage, const std::function<std::string()>& text, const std::string& subject) const {
  if (!wants(stage)) return;
  std::string out = "; after " + stage + (subject.empty() ? "" : " of " + subject) + "\n" + text();
  if (!out.empty() && out.back() != '\n') out += '\n';
  if (sink_) sink_(out);
  else std::cout << out << std::flush;
}

}  // namespace kiln
