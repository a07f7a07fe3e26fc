#include "frontend/subst/rule.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "frontend/ir/error.h"
#include "frontend/subst/verified_rules_text.h"

namespace kiln::subst {
namespace {

// A recursive-descent reader of to_string's output: name, or op[params](args).
class TermReader {
 public:
  explicit TermReader(const std::string& text) : s_(text) {}

  TermRef read_all() {
    TermRef t = term();
    skip();
    if (i_ != s_.size()) fail("text after the term");
    return t;
  }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("term '" + s_ + "': " + what + " at character " + std::to_string(i_ + 1));
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string word() {
    skip();
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    if (i_ == start) fail("expected a name");
    return s_.substr(start, i_ - start);
  }
  int64_t number() {
    skip();
    const size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ == start) fail("expected a number");
    return std::stoll(s_.substr(start, i_ - start));
  }

  // One parameter of `t`'s bracket: "axis 1", "at 2", "at extent(w, 0)", "valid", "relu",
  // "depthwise", "group 2", "stride 2", "from 1".
  void param(Term& t) {
    const std::string key = word();
    if (key == "axis") t.axis = number();
    else if (key == "at") {
      skip();
      if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        t.split_at = number();
      } else {
        if (word() != "extent") fail("expected a number or extent(leaf, axis)");
        expect('(');
        t.split_at = -1;
        t.split_leaf = word();
        expect(',');
        t.split_leaf_axis = number();
        expect(')');
      }
    } else if (key == "valid") t.same = false;
    else if (key == "relu") t.relu = true;
    else if (key == "depthwise") t.group = 0;
    else if (key == "group") t.group = number();
    else if (key == "stride") t.stride = number();
    else if (key == "from") t.from = number();
    else fail("unknown parameter '" + key + "'");
  }

  TermRef term() {
    auto t = std::make_shared<Term>();
    const std::string name = word();
    skip();
    if (i_ == s_.size() || (s_[i_] != '[' && s_[i_] != '(')) {
      t->op = "leaf";
      t->name = name;
      return t;
    }
    static const std::set<std::string> ops = {"ewadd", "ewmul", "smul",     "transpose", "matmul", "conv",   "enlarge",
                                              "relu",  "pool_avg", "pool_max", "concat", "split0", "split1", "biasadd"};
    if (!ops.count(name)) fail("unknown operator '" + name + "'");
    t->op = name;
    if (eat('[')) {
      do param(*t);
      while (eat(','));
      expect(']');
    }
    expect('(');
    do t->args.push_back(term());
    while (eat(','));
    expect(')');
    // A split point written as the extent along the split's own axis reads back as -1 (to_string's form).
    if ((name == "split0" || name == "split1") && t->split_at < 0 && t->split_leaf_axis == t->axis) t->split_leaf_axis = -1;
    return t;
  }

  const std::string& s_;
  size_t i_ = 0;
};

// The leaves `t` reads: its leaf operands and the leaves its split points are measured on.
void leaves_read(const TermRef& t, std::set<std::string>& out) {
  if (t->op == "leaf") out.insert(t->name);
  if ((t->op == "split0" || t->op == "split1") && t->split_at < 0) out.insert(t->split_leaf);
  for (const TermRef& a : t->args) leaves_read(a, out);
}

// Whether `from` can be found in a graph (it is an operator, not a bare leaf) and every leaf `to`
// reads appears in it: a rewrite can only build what the matched side binds.
bool applicable(const TermRef& from, const TermRef& to) {
  if (from->op == "leaf") return false;
  const std::vector<std::string> l = leaves(from);
  const std::set<std::string> bound(l.begin(), l.end());
  std::set<std::string> needed;
  leaves_read(to, needed);
  return std::includes(bound.begin(), bound.end(), needed.begin(), needed.end());
}

}  // namespace

std::string to_string(const Rule& r) {
  std::string l, rh;
  for (size_t i = 0; i < r.lhs.size(); ++i) {
    l += (i ? " ; " : "") + to_string(r.lhs[i]);
    rh += (i ? " ; " : "") + to_string(r.rhs[i]);
  }
  return l + " => " + rh;
}

TermRef parse_term(const std::string& text) { return TermReader(text).read_all(); }

std::vector<Rule> parse_rule_file(const std::string& text, const std::string& file) {
  std::vector<Rule> out;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) throw Error(file + ":" + std::to_string(number) + ": expected 'lhs = rhs'");
    TermRef lhs, rhs;
    try {
      lhs = parse_term(line.substr(0, eq));
      rhs = parse_term(line.substr(eq + 3));
    } catch (const Error& e) {
      throw Error(file + ":" + std::to_string(number) + ": " + e.what());
    }
    const std::string name = file + ":" + std::to_string(number);
    if (applicable(lhs, rhs)) out.push_back({name, {lhs}, {rhs}});
    if (applicable(rhs, lhs)) out.push_back({name + " reversed", {rhs}, {lhs}});
  }
  return out;
}

const std::vector<Rule>& verified_rules() {
  static const std::vector<Rule> rules = parse_rule_file(kVerifiedRulesText, kVerifiedRulesFile);
  return rules;
}

const std::vector<Rule>& merge_rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> out;
    const TermRef x = leaf("x"), y = leaf("y"), z = leaf("z"), w = leaf("w"), v = leaf("v"), u = leaf("u"), b = leaf("b"),
                  c = leaf("c");
    // Two convs of one input (or a 1x1 conv enlarged to 3x3 and a 3x3 conv): one conv by the
    // concatenated kernels (and biases), split back at the first kernel's filter count.
    for (const bool enlarged : {false, true})
      for (const bool bias : {false, true})
        for (const bool fused_relu : {false, true}) {
          const TermRef first = enlarged ? u : w, second = enlarged ? w : v;
          const std::string first_name = enlarged ? "u" : "w";
          const TermRef first_kernel = enlarged ? enlarge(u, 1) : w;
          auto one = [&](const TermRef& kernel, const TermRef& bias_leaf) {
            return bias ? conv_bias(x, kernel, bias_leaf, true, fused_relu) : conv(x, kernel, true, fused_relu);
          };
          const TermRef merged = one(concat(0, first_kernel, second), concat(0, b, c));
          std::string name = std::string(enlarged ? "enlarge and merge" : "merge") + " two " + (fused_relu ? "relu " : "") +
                             "convs" + (bias ? " with biases" : "");
          out.push_back({name,
                         {one(first, b), one(second, c)},
                         {split0_at(1, first_name, 0, merged), split1_at(1, first_name, 0, merged)},
                         !enlarged});
        }
    const TermRef product = matmul(x, concat(1, y, z));
    out.push_back({"merge two matmuls", {matmul(x, y), matmul(x, z)}, {split0_at(1, "y", 1, product), split1_at(1, "y", 1, product)}, true});
    // With a bias each (a Linear layer; BERT's query, key and value projections).
    const TermRef linear = biasadd(product, concat(0, b, c));
    out.push_back({"merge two matmuls with biases",
                   {biasadd(matmul(x, y), b), biasadd(matmul(x, z), c)},
                   {split0_at(1, "y", 1, linear), split1_at(1, "y", 1, linear)},
                   true});
    return out;
  }();
  return rules;
}

const std::vector<Rule>& sum_rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> out;
    const TermRef x = leaf("x"), y = leaf("y"), w = leaf("w"), v = leaf("v"), b = leaf("b"), c = leaf("c");
    // Which kernel is 1x1 and enlarged to the other's 3x3. Both orders are rules: a match binds an
    // Add's operands in the first order that fits the left side, and it fits either.
    enum class Small { Neither, First, Second };
    // The kernels (and biases) are constants wherever a model has them, so the rewritten side's sum
    // and enlarge fold at compile time and one conv is left: with a 1x1 branch, RepVGG's
    // structural re-parameterization. The chained form adds a conv to a running sum that already
    // holds one (MobileOne's `out += conv_i(x)` over four branches), so each branch folds in one
    // step, without reassociating the sum first.
    for (const int64_t group : {int64_t{1}, int64_t{0}})
      for (const int64_t stride : {int64_t{1}, int64_t{2}})
        for (const bool bias : {false, true})
          for (const Small small : {Small::Neither, Small::First, Small::Second})
            for (const bool chained : {false, true}) {
              auto one = [&](const TermRef& kernel, const TermRef& bias_term) {
                return bias ? conv_bias(x, kernel, bias_term, true, false, group, stride)
                            : conv(x, kernel, true, false, group, stride);
              };
              const TermRef first_kernel = small == Small::First ? enlarge(w, 1) : w;
              const TermRef second_kernel = small == Small::Second ? enlarge(v, 1) : v;
              const TermRef summed = one(ewadd(first_kernel, second_kernel), bias ? ewadd(b, c) : TermRef());
              const TermRef first = one(w, b), second = one(v, c);
              std::string name = std::string(small == Small::Neither ? "sum" : "enlarge and sum") + " two " +
                                 (group == 0 ? "depthwise " : "") + (stride == 2 ? "stride-2 " : "") + "convs" +
                                 (bias ? " with biases" : "") + (chained ? " in a running sum" : "");
              if (small == Small::First) name += " (the first 1x1)";
              out.push_back({name,
                             {chained ? ewadd(ewadd(first, y), second) : ewadd(first, second)},
                             {chained ? ewadd(summed, y) : summed}});
            }
    return out;
  }();
  return rules;
}

}  // namespace kiln::subst
