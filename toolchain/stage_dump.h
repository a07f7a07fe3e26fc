/// \file `--dump-after STAGE`: which stages print their result, and where the text goes.
///
/// Every stage of toolchain/pipeline.cc has a name (pipeline_stages()); `kiln dump` and `kiln compile`
/// take the same names. A dump is "; after STAGE\n" (or "; after STAGE of SUBJECT\n" for a stage that
/// prints once per task) followed by the stage's printer. The text is built only when wanted, since
/// printing a large model's graph or LLVM IR costs time.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace kiln {

/// The stage names in pipeline order. "analysis" and "sketch" are printed per task inside the
/// schedule stage (the facts and the sketches a schedule is chosen from).
const std::vector<std::string>& pipeline_stages();

class StageDump {
 public:
  using Sink = std::function<void(const std::string& text)>;
  /// Dumps nothing.
  StageDump() = default;
  /// Dumps the named stages ("all": every stage) into `sink` (null: stdout). Throws Error naming the
  /// flag for a name that is no stage.
  StageDump(std::vector<std::string> stages, Sink sink = nullptr);

  bool wants(const std::string& stage) const;
  /// The last stage wanted, in pipeline order ("" when none): how far `kiln dump` has to run.
  std::string last_wanted() const;
  void dump(const std::string& stage, const std::function<std::string()>& text, const std::string& subject = "") const;

 private:
  std::vector<std::string> stages_;
  Sink sink_;
};

}  // namespace kiln
