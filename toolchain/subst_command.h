/// \file `kiln subst axioms`: TASO's operator properties (frontend/subst/axioms.h), each checked on
/// concrete tensors, as a table. The first of issue 20's `kiln subst` tools; the generator and the
/// verifier will join it. Kept out of main.cc like `kiln records`.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>

namespace kiln {

class SubstCommand {
 public:
  explicit SubstCommand(CLI::App& app);
  /// Runs the action when `subst` was given: 0 when every axiom holds, 1 when one does not (a
  /// kiln bug, which the table names); -1 when `subst` was not given.
  int run();

 private:
  CLI::App* cmd_;
  CLI::App* axioms_;
  uint64_t seed_ = 1;
  int64_t max_cases_ = 0;
};

}  // namespace kiln
