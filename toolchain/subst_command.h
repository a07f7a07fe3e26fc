/// \file `kiln subst axioms`: TASO's operator properties (frontend/subst/axioms.h), each checked on
/// concrete tensors, as a table; `kiln subst generate`: the candidate substitutions
/// (frontend/subst/generator.h) with the count after each stage, and with `--verify` those Z3 proves
/// from the axioms (verifier.h); `kiln subst rules`: the rules the optimizer applies (rule.h). Kept out
/// of main.cc like `kiln records`.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace kiln {

class SubstCommand {
 public:
  explicit SubstCommand(CLI::App& app);
  /// Runs the action when `subst` was given: 0 when it succeeded, 1 when an axiom does not hold (a
  /// kiln bug, which the table names); -1 when `subst` was not given. Throws Error when the
  /// candidates file cannot be written.
  int run();

 private:
  CLI::App* cmd_;
  CLI::App* axioms_;
  CLI::App* generate_;
  CLI::App* rules_;
  uint64_t seed_ = 1;
  int64_t max_cases_ = 0;
  int max_ops_ = 3;
  bool verify_ = false;
  unsigned rlimit_ = 200000;
  std::string out_;
};

}  // namespace kiln
