#include "toolchain/subst_command.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "frontend/subst/axioms.h"

namespace kiln {

SubstCommand::SubstCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("subst", "Graph substitutions (TASO): the operator axioms");
  cmd_->require_subcommand(1);
  axioms_ = cmd_->add_subcommand("axioms", "Check every operator axiom on concrete tensors (every shape up to 4x4x4x4)");
  axioms_->add_option("--seed", seed_, "Seed of the random integer tensors")->capture_default_str();
  axioms_->add_option("--max-cases", max_cases_, "Check at most this many shape cases per axiom (0: all)")->capture_default_str();
}

int SubstCommand::run() {
  if (!*cmd_) return -1;
  int failed = 0;
  int64_t cases = 0;
  const auto start = std::chrono::steady_clock::now();
  std::cout << "| axiom | statement | cases | result |\n|---|---|---:|---|\n";
  for (const subst::Axiom& a : subst::axioms()) {
    const subst::AxiomCheck r = subst::check_axiom(a, seed_, max_cases_);
    cases += r.cases;
    failed += r.failed > 0;
    std::cout << fmt::format("| {} | `{} = {}` | {} | {} |\n", a.name, subst::to_string(a.lhs), subst::to_string(a.rhs), r.cases,
                             r.failed ? fmt::format("FAILS in {} ({})", r.failed, r.first_failure) : "holds");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("\n{} axioms, {} shape cases, {} failing; {:.1f} s\n", subst::axioms().size(), cases, failed, seconds);
  return failed ? 1 : 0;
}

}  // namespace kiln
