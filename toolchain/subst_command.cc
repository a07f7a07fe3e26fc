#include "toolchain/subst_command.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/subst/axioms.h"
#include "frontend/subst/generator.h"
#include "frontend/subst/optimizer.h"
#include "frontend/subst/rule.h"
#include "frontend/subst/verifier.h"

namespace kiln {

SubstCommand::SubstCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("subst", "Graph substitutions (TASO): the operator axioms, the candidates, the rules");
  cmd_->require_subcommand(1);
  axioms_ = cmd_->add_subcommand("axioms", "Check every operator axiom on concrete tensors (every shape up to 4x4x4x4)");
  axioms_->add_option("--seed", seed_, "Seed of the random integer tensors")->capture_default_str();
  axioms_->add_option("--max-cases", max_cases_, "Check at most this many shape cases per axiom (0: all)")->capture_default_str();
  generate_ = cmd_->add_subcommand("generate", "Enumerate candidate substitutions and print the count after each stage");
  generate_->add_option("--max-ops", max_ops_, "Operators per side, at most (1 to 3)")->capture_default_str();
  generate_->add_option("--seed", seed_, "Seed of the fingerprint and test data")->capture_default_str();
  generate_->add_option("-o,--output", out_, "Write the candidates (with --verify: the proved ones) here, one 'lhs = rhs' per line");
  generate_->add_flag("--verify", verify_, "Prove each candidate from the axioms with Z3; keep the proved ones");
  generate_->add_option("--rlimit", rlimit_, "Z3's step limit per candidate (deterministic, unlike a time limit)")
      ->capture_default_str();
  rules_ = cmd_->add_subcommand("rules", "The rules the optimizer can apply: the verified rule file compiled in, and the merges");
}

namespace {

// How many rules each source gives the optimizer (frontend/subst/rule.h, optimizer.h).
int print_rules() {
  const std::vector<subst::Rule>& verified = subst::verified_rules();
  std::cout << fmt::format("{} verified rules compiled in, as {} applicable rewrites (each direction that binds what it builds)\n",
                           [&] {
                             std::set<std::string> lines;
                             for (const subst::Rule& r : verified) lines.insert(r.name.substr(0, r.name.find(' ')));
                             return lines.size();
                           }(),
                           verified.size());
  auto list = [](const std::string& what, const std::vector<subst::Rule>& rules) {
    std::cout << fmt::format("{} {}:\n", rules.size(), what);
    for (const subst::Rule& r : rules) std::cout << "  " << r.name << ": " << subst::to_string(r) << "\n";
  };
  list("merge rules (multi-output)", subst::merge_rules());
  list("sum rules (two convs of one input added)", subst::sum_rules());
  std::cout << fmt::format("{} rules searched by default (merges, sums, and the rewrites that add no operator, once up to "
                           "ewadd/ewmul argument order)\n",
                           subst::default_rules().size());
  return 0;
}

int generate(int max_ops, uint64_t seed, bool verify, unsigned rlimit, const std::string& out_path) {
  const auto start = std::chrono::steady_clock::now();
  const subst::GeneratorResult r = subst::generate_candidates({max_ops, seed});
  const auto seconds_since = [](auto t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
  const double generated_s = seconds_since(start);
  const subst::GeneratorStats& s = r.stats;
  std::cout << fmt::format(
      "| stage | count |\n|---|---:|\n| terms of up to {} operators | {} |\n| shape-correct | {} |\n"
      "| pairs with equal fingerprints | {} |\n| ... agreeing on random floats | {} |\n| ... after input renaming | {} |\n"
      "| ... after common subgraphs | {} |\n",
      max_ops, s.terms, s.valid, s.fingerprint_pairs, s.after_float_tests, s.after_renaming, s.after_common_subgraph);
  std::vector<subst::Candidate> kept = r.candidates;
  std::string verified;
  if (verify) {
    const auto proving = std::chrono::steady_clock::now();
    subst::VerifyResult v = subst::verify_candidates(r.candidates, {rlimit});
    std::cout << fmt::format("| ... proved from the axioms (Z3, rlimit {} each) | {} |\n", rlimit, v.proved.size());
    verified = fmt::format(", proving {:.1f} s ({} not proved)", seconds_since(proving), v.unproved);
    kept = std::move(v.proved);
  }
  std::cout << fmt::format("\ngenerating {:.1f} s{}\n", generated_s, verified);
  if (!out_path.empty()) {
    std::ofstream out(out_path);
    out << fmt::format("# kiln graph substitutions: `kiln subst generate --max-ops {} --seed {}{}`\n", max_ops, seed,
                       verify ? fmt::format(" --verify --rlimit {}", rlimit) : "");
    out << fmt::format("# axioms: {}, hash {}\n", subst::axioms().size(), subst::axioms_hash());
    for (const subst::Candidate& c : kept) out << subst::to_string(c.lhs) << " = " << subst::to_string(c.rhs) << "\n";
    if (!out.flush()) throw Error(out_path + ": cannot write the candidates");
  }
  return 0;
}

}  // namespace

int SubstCommand::run() {
  if (!*cmd_) return -1;
  if (*generate_) return generate(max_ops_, seed_, verify_, rlimit_, out_);
  if (*rules_) return print_rules();
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
