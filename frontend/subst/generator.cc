#include "frontend/subst/generator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/subst/term_graph.h"

namespace kiln::subst {
namespace {

// A term and the kind of tensor it gives ("matrix", "fmap", "kernel3", "kernel1", "scalar"): the
// enumeration only builds terms whose operands are of the kinds the operator takes.
struct Typed {
  TermRef term;
  std::string kind;
};

// Leaves of one kind each, with their shape; and the operators that apply in the world.
struct World {
  std::vector<std::pair<std::string, std::string>> leaves;  // name, kind
  std::map<std::string, Shape> shapes;                       // by kind
  bool matrices = false;
};

World matrix_world() {
  return {{{"x", "matrix"}, {"y", "matrix"}, {"z", "matrix"}, {"s", "scalar"}}, {{"matrix", {3, 3}}, {"scalar", {}}}, true};
}

World conv_world() {
  return {{{"x", "fmap"}, {"y", "fmap"}, {"w", "kernel3"}, {"v", "kernel3"}, {"u", "kernel1"}, {"s", "scalar"}},
          {{"fmap", {1, 2, 3, 3}}, {"kernel3", {2, 2, 3, 3}}, {"kernel1", {2, 2, 1, 1}}, {"scalar", {}}},
          false};
}

// Every well-kinded term of exactly n operators, by n.
std::vector<std::vector<Typed>> enumerate(const World& w, int max_ops) {
  std::vector<std::vector<Typed>> by_ops(static_cast<size_t>(max_ops) + 1);
  std::vector<TermRef> scalars;
  for (const auto& [name, kind] : w.leaves) {
    if (kind == "scalar") scalars.push_back(leaf(name));
    else by_ops[0].push_back({leaf(name), kind});
  }
  for (int n = 1; n <= max_ops; ++n) {
    std::vector<Typed>& out = by_ops[static_cast<size_t>(n)];
    for (const Typed& a : by_ops[static_cast<size_t>(n - 1)]) {
      for (const TermRef& s : scalars) out.push_back({smul(a.term, s), a.kind});
      if (a.kind == "matrix" || a.kind == "fmap") out.push_back({relu(a.term), a.kind});
      if (a.kind == "matrix") out.push_back({transpose(a.term), a.kind});
      if (a.kind == "fmap") {
        out.push_back({pool_avg(a.term), a.kind});
        out.push_back({pool_max(a.term), a.kind});
      }
      if (a.kind == "kernel1") out.push_back({enlarge(a.term, 1), "kernel3"});
    }
    for (int left = 0; left < n; ++left)
      for (const Typed& a : by_ops[static_cast<size_t>(left)])
        for (const Typed& b : by_ops[static_cast<size_t>(n - 1 - left)]) {
          if (a.kind == b.kind) {
            out.push_back({ewadd(a.term, b.term), a.kind});
            if (w.matrices) out.push_back({ewmul(a.term, b.term), a.kind});
          }
          if (a.kind == "matrix" && b.kind == "matrix") out.push_back({matmul(a.term, b.term), "matrix"});
          if (a.kind == "fmap" && (b.kind == "kernel3" || b.kind == "kernel1")) {
            out.push_back({conv(a.term, b.term), "fmap"});
            out.push_back({conv(a.term, b.term, true, true), "fmap"});
          }
        }
  }
  return by_ops;
}

std::map<std::string, Tensor> leaf_values(const World& w, std::mt19937_64& rng, bool integers) {
  std::map<std::string, Tensor> out;
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_real_distribution<double> real(-1, 1);
  for (const auto& [name, kind] : w.leaves) {
    const Shape& shape = w.shapes.at(kind);
    std::vector<double> v(static_cast<size_t>(num_elements(shape)));
    for (double& x : v) x = integers ? small(rng) : real(rng);
    out[name] = Tensor::from_doubles(DType::Float64, shape, v);
  }
  return out;
}

uint64_t fingerprint(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (int64_t d : t.shape()) mix(static_cast<uint64_t>(d));
  for (int64_t i = 0; i < t.size(); ++i) mix(static_cast<uint64_t>(std::llround(t.get_double(i) * 1e6)));
  return h;
}

bool agree(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.size(); ++i)
    if (std::abs(a.get_double(i) - b.get_double(i)) > 1e-9 * std::max(1.0, std::abs(a.get_double(i)))) return false;
  return true;
}

TermRef renamed(const TermRef& t, const std::map<std::string, std::string>& names) {
  if (t->op == "leaf") return leaf(names.at(t->name));
  auto copy = std::make_shared<Term>(*t);
  for (TermRef& a : copy->args) a = renamed(a, names);
  return copy;
}

// The pair with its leaves renamed in order of first appearance (per kind), oriented so that its
// text is the least of the two orientations: one form for pairs that differ only in their leaves'
// names or in orientation.
Candidate canonical(const Candidate& c, const World& w) {
  std::map<std::string, std::string> kind_of;
  std::map<std::string, std::vector<std::string>> names_of_kind;
  for (const auto& [name, kind] : w.leaves) {
    kind_of[name] = kind;
    names_of_kind[kind].push_back(name);
  }
  auto oriented = [&](const TermRef& first, const TermRef& second) {
    std::map<std::string, std::string> rename;
    std::map<std::string, size_t> used;
    for (const TermRef& side : {first, second})
      for (const std::string& l : leaves(side))
        if (!rename.count(l)) rename[l] = names_of_kind[kind_of[l]][used[kind_of[l]]++];
    return Candidate{renamed(first, rename), renamed(second, rename), c.leaf_shapes};
  };
  const Candidate a = oriented(c.lhs, c.rhs), b = oriented(c.rhs, c.lhs);
  const auto text = [](const Candidate& x) { return to_string(x.lhs) + " = " + to_string(x.rhs); };
  return text(a) <= text(b) ? a : b;
}

void subterms(const TermRef& t, std::set<std::string>& out) {
  if (t->op == "leaf") return;
  out.insert(to_string(t));
  for (const TermRef& a : t->args) subterms(a, out);
}

bool same_root(const Term& a, const Term& b) {
  return a.op == b.op && a.axis == b.axis && a.split_at == b.split_at && a.split_leaf == b.split_leaf &&
         a.split_leaf_axis == b.split_leaf_axis && a.group == b.group && a.same == b.same &&
         a.relu == b.relu && a.from == b.from && a.args.size() == b.args.size();
}

TermRef replaced(const TermRef& t, const std::string& target, const TermRef& by) {
  if (t->op != "leaf" && to_string(t) == target) return by;
  if (t->op == "leaf") return t;
  auto copy = std::make_shared<Term>(*t);
  for (TermRef& a : copy->args) a = replaced(a, target, by);
  return copy;
}

// Whether `a` and `b` agree on each of `data` (leaf values drawn at random).
bool equivalent(const TermRef& a, const TermRef& b, const std::vector<std::map<std::string, Tensor>>& data) {
  for (const auto& leaves : data) {
    std::vector<Tensor> out;
    try {
      out = evaluate({a, b}, leaves);
    } catch (const Error&) {
      return false;
    }
    if (!agree(out[0], out[1])) return false;
  }
  return true;
}

// Implied by a smaller pair, as TASO's common-subgraph pruning has it:
// - a common output: the same operator at both roots, all arguments alike but one pair that is
//   itself equivalent (relu(A) = relu(B) follows from A = B; relu(relu(x)) = relu(x) does not, as
//   relu(x) = x does not hold);
// - a common input: a non-leaf subterm on both sides that can be replaced by a fresh leaf with the
//   pair still holding (then the pair is an instance of that more general one).
bool implied_by_smaller(const Candidate& c, const std::vector<std::map<std::string, Tensor>>& data) {
  if (same_root(*c.lhs, *c.rhs)) {
    std::vector<size_t> differ;
    for (size_t i = 0; i < c.lhs->args.size(); ++i)
      if (to_string(c.lhs->args[i]) != to_string(c.rhs->args[i])) differ.push_back(i);
    if (differ.size() == 1 && equivalent(c.lhs->args[differ[0]], c.rhs->args[differ[0]], data)) return true;
  }
  std::set<std::string> l, r;
  subterms(c.lhs, l);
  subterms(c.rhs, r);
  for (const std::string& common : l) {
    if (!r.count(common)) continue;
    // The subterm's shape, from its value; a fresh leaf of that shape takes its place.
    std::vector<std::map<std::string, Tensor>> general = data;
    TermRef sub;
    std::function<void(const TermRef&)> find = [&](const TermRef& t) {
      if (!sub && t->op != "leaf" && to_string(t) == common) sub = t;
      for (const TermRef& a : t->args) find(a);
    };
    find(c.lhs);
    std::mt19937_64 rng(std::hash<std::string>{}(common));
    std::uniform_real_distribution<double> u(-1, 1);
    for (auto& leaves : general) {
      const Shape shape = evaluate({sub}, leaves).at(0).shape();
      std::vector<double> v(static_cast<size_t>(num_elements(shape)));
      for (double& x : v) x = u(rng);
      leaves["g"] = Tensor::from_doubles(DType::Float64, shape, v);
    }
    const TermRef g = leaf("g");
    if (equivalent(replaced(c.lhs, common, g), replaced(c.rhs, common, g), general)) return true;
  }
  return false;
}

void generate_in(const World& w, const GeneratorOptions& o, GeneratorResult& result) {
  GeneratorStats& st = result.stats;
  std::mt19937_64 rng(o.seed);
  const std::map<std::string, Tensor> ints = leaf_values(w, rng, true);
  const std::vector<std::map<std::string, Tensor>> floats = {leaf_values(w, rng, false), leaf_values(w, rng, false)};
  std::vector<TermRef> valid;
  std::map<uint64_t, std::vector<size_t>> groups;
  for (const std::vector<Typed>& level : enumerate(w, o.max_ops))
    for (const Typed& t : level) {
      ++st.terms;
      Tensor value;
      try {
        value = evaluate({t.term}, ints).at(0);
      } catch (const Error&) {
        // Operands whose shapes do not fit. None in today's worlds, whose leaves of one kind share a
        // shape; a world with matrices of several shapes would have well-kinded terms that do not.
        continue;
      }
      ++st.valid;
      groups[fingerprint(value)].push_back(valid.size());
      valid.push_back(t.term);
    }
  std::map<size_t, std::vector<Tensor>> float_values;  // by valid index, evaluated once
  auto on_floats = [&](size_t i) -> const std::vector<Tensor>& {
    auto it = float_values.find(i);
    if (it != float_values.end()) return it->second;
    std::vector<Tensor>& v = float_values[i];
    for (const auto& leaves : floats) v.push_back(evaluate({valid[i]}, leaves).at(0));
    return v;
  };
  std::map<std::string, Shape> leaf_shapes;
  for (const auto& [name, kind] : w.leaves) leaf_shapes[name] = w.shapes.at(kind);
  std::set<std::string> seen;
  for (const auto& [hash, members] : groups)
    for (size_t a = 0; a < members.size(); ++a)
      for (size_t b = a + 1; b < members.size(); ++b) {
        ++st.fingerprint_pairs;
        const std::vector<Tensor>&fa = on_floats(members[a]), &fb = on_floats(members[b]);
        if (!agree(fa[0], fb[0]) || !agree(fa[1], fb[1])) continue;
        ++st.after_float_tests;
        const Candidate c = canonical({valid[members[a]], valid[members[b]], leaf_shapes}, w);
        if (!seen.insert(to_string(c.lhs) + " = " + to_string(c.rhs)).second) continue;
        ++st.after_renaming;
        if (implied_by_smaller(c, floats)) continue;
        ++st.after_common_subgraph;
        result.candidates.push_back(c);
      }
}

}  // namespace

GeneratorResult generate_candidates(const GeneratorOptions& o) {
  // Four operators (TASO's own bound) need the pairs streamed rather than held: not yet.
  if (o.max_ops < 1 || o.max_ops > 3) throw Error("subst generate: --max-ops must be 1 to 3, got " + std::to_string(o.max_ops));
  GeneratorResult r;
  generate_in(matrix_world(), o, r);
  generate_in(conv_world(), o, r);
  return r;
}

}  // namespace kiln::subst
