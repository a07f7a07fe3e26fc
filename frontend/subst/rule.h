/// \file Substitution rules as the optimizer applies them (issue 20, point 5): the verified rule
/// file's single-output rules, and TASO's multi-output merges.
///
/// Why multi-output rules: the substitutions that make networks faster replace several operators
/// that share an input by one larger operator (two convs of one feature map by one conv with the
/// kernels concatenated, then split; Q, K and V's matmuls by one). Each output of such a rule is a
/// single-output equation (conv(x, w) = split0(conv(x, concat(w, v)))) that the verifier proves from
/// the axioms (the test `Rules.MergeRulesAreProved` proves every half of every merge rule); the
/// rule is those equations applied together, with the right-hand sides sharing their operators.
#pragma once
#include <string>
#include <vector>

#include "frontend/subst/term.h"

namespace kiln::subst {

/// lhs[i] = rhs[i] for every i, the right-hand sides sharing common subterms (the same TermRef).
struct Rule {
  std::string name;
  std::vector<TermRef> lhs, rhs;
  /// The outputs may be matched in either order to the same effect (two convs merged either way):
  /// a match takes them in graph order only.
  bool symmetric = false;
};

/// "conv(x, w) => ...": the rule's text, the outputs joined by " ; ".
std::string to_string(const Rule& r);

/// A term as to_string(TermRef) writes it. Throws Error naming the text on a syntax error.
TermRef parse_term(const std::string& text);

/// The rules of a rule file (`frontend/subst/verified_rules.txt`'s format: one `lhs = rhs` per line,
/// '#' comments), each in the direction it is written and the reverse where that can be applied (its
/// left side is an operator and binds every leaf of its right side). Throws Error naming the file
/// and line on a malformed one.
std::vector<Rule> parse_rule_file(const std::string& text, const std::string& file);

/// The verified rule file compiled into kiln (both directions of each rule).
const std::vector<Rule>& verified_rules();

/// TASO's merges of two operators sharing an input: convs (with or without a bias, with or without a
/// fused relu, both alike), a 1x1 conv enlarged to 3x3 and merged with a 3x3 one, and matmuls.
const std::vector<Rule>& merge_rules();

/// Two convs of one input whose outputs are added (directly, or into a running sum), as one conv by
/// the summed kernels (and biases), a 1x1 kernel enlarged to 3x3 first; plain and depthwise, at
/// stride 1 and 2: single-output rules of more operators than the generator enumerates, each proved
/// from the axioms (`Rules.SumRulesAreProved`).
const std::vector<Rule>& sum_rules();

}  // namespace kiln::subst
