#include "scheduler/sketch/mutation_rules.h"

#include <fmt/format.h>

#include "scheduler/sketch/vector_axis.h"
#include "scheduler/state/step.h"
#include "scheduler/state/steps/annotation_step.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/fuse_step.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/split_step.h"

namespace kiln::sketch {

using namespace state;

namespace {

template <typename T>
std::vector<size_t> steps_of_type(const State& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.steps().size(); ++i)
    if (dynamic_cast<const T*>(s.steps()[i].get())) out.push_back(i);
  return out;
}

size_t pick_index(size_t n, Rng& rng) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

std::optional<State> replayed(const State& s, std::vector<StepRef> steps) {
  try {
    return replay(s.dag_ptr(), steps);
  } catch (const ScheduleError&) {
    return std::nullopt;
  }
}

// Moves a factor from one tile level of a split to another (the outermost, implicit level included).
class MutateTileSize : public MutationRule {
 public:
  const char* name() const override { return "tile-size"; }
  double weight() const override { return 0.90; }
  std::optional<State> apply(const State& s, const SearchParams& p, Rng& rng) const override {
    std::vector<size_t> splits = steps_of_type<SplitStep>(s);
    if (splits.empty()) return std::nullopt;
    for (int attempt = 0; attempt < 8; ++attempt) {
      const size_t idx = splits[pick_index(splits.size(), rng)];
      auto* sp = static_cast<const SplitStep*>(s.steps()[idx].get());
      std::vector<int64_t> ls;
      for (const auto& l : sp->lengths) ls.push_back(l.value_or(1));
      const size_t n = ls.size();
      // Level n stands for the implicit outer loop: dividing it out of a length hands the factor to it.
      const size_t from = pick_index(n + 1, rng), to = pick_index(n + 1, rng);
      if (from == to) continue;
      int64_t factor = 0;
      if (from == n) {
        // Take a factor from the outer loop: a divisor of the remaining extent.
        int64_t product = 1;
        for (int64_t l : ls) product *= l;
        const int64_t outer = (sp->extent + product - 1) / product;
        std::vector<int64_t> ds;
        for (int64_t d = 2; d <= outer; ++d)
          if (outer % d == 0) ds.push_back(d);
        if (ds.empty()) continue;
        factor = ds[pick_index(ds.size(), rng)];
      } else {
        std::vector<int64_t> ds;
        for (int64_t d = 2; d <= ls[from]; ++d)
          if (ls[from] % d == 0) ds.push_back(d);
        if (ds.empty()) continue;
        factor = ds[pick_index(ds.size(), rng)];
        ls[from] /= factor;
      }
      if (to < n) ls[to] *= factor;
      if (ls.back() > p.max_innermost_factor) continue;
      if (auto next = with_split_lengths(s, idx, ls)) return next;
    }
    return std::nullopt;
  }
};

class MutateAutoUnroll : public MutationRule {
 public:
  const char* name() const override { return "auto-unroll"; }
  double weight() const override { return 0.04; }
  std::optional<State> apply(const State& s, const SearchParams&, Rng& rng) const override {
    std::vector<size_t> pragmas = steps_of_type<PragmaStep>(s);
    if (pragmas.empty()) return std::nullopt;
    const size_t idx = pragmas[pick_index(pragmas.size(), rng)];
    auto* pr = static_cast<const PragmaStep*>(s.steps()[idx].get());
    static const std::vector<int64_t> values = {0, 16, 64, 512};
    std::vector<StepRef> steps = s.steps();
    std::string v = fmt::format("auto_unroll_max_step${}", values[pick_index(values.size(), rng)]);
    if (v == pr->pragma) return std::nullopt;
    steps[idx] = std::make_shared<PragmaStep>(pr->stage_id, pr->iter_id, v);
    return replayed(s, steps);
  }
};

// Moves a stage computed inside a loop to another of its candidate loops (compute_location_candidates).
class MutateComputeLocation : public MutationRule {
 public:
  const char* name() const override { return "compute-location"; }
  double weight() const override { return 0.05; }
  std::optional<State> apply(const State& s, const SearchParams&, Rng& rng) const override {
    std::vector<size_t> cas = steps_of_type<ComputeAtStep>(s);
    if (cas.empty()) return std::nullopt;
    const size_t idx = cas[pick_index(cas.size(), rng)];
    auto* ca = static_cast<const ComputeAtStep*>(s.steps()[idx].get());
    std::vector<StepRef> steps = s.steps();
    std::optional<State> before = replayed(s, std::vector<StepRef>(steps.begin(), steps.begin() + static_cast<long>(idx)));
    if (!before) return std::nullopt;
    std::vector<std::pair<int, int>> options;
    for (const auto& [target, k] : compute_location_candidates(*before, ca->stage_id))
      if (target != ca->target_stage_id || k != ca->target_iter_id) options.emplace_back(target, k);
    if (options.empty()) return std::nullopt;
    const auto& [target, k] = options[pick_index(options.size(), rng)];
    steps[idx] = std::make_shared<ComputeAtStep>(ca->stage_id, target, k);
    return replayed(s, steps);
  }
};

// Puts another loop of a tiled stage's innermost level innermost (vector_axis.h).
class MutateVectorAxis : public MutationRule {
 public:
  const char* name() const override { return "vector-axis"; }
  double weight() const override { return 0.02; }
  std::optional<State> apply(const State& s, const SearchParams&, Rng& rng) const override {
    std::vector<VectorAxisChoice> choices = vector_axis_choices(s);
    if (choices.empty()) return std::nullopt;
    const VectorAxisChoice& c = choices[pick_index(choices.size(), rng)];
    return with_vector_axis(s, c, c.others[pick_index(c.others.size(), rng)]);
  }
};

// Changes how many outer loops a parallel loop fuses; later steps addressing that stage's loops are
// renumbered by the difference.
class MutateParallel : public MutationRule {
 public:
  const char* name() const override { return "parallel"; }
  double weight() const override { return 0.01; }
  std::optional<State> apply(const State& s, const SearchParams& p, Rng& rng) const override {
    std::vector<size_t> cands;
    for (size_t i = 0; i < s.steps().size(); ++i) {
      auto* an = dynamic_cast<const AnnotationStep*>(s.steps()[i].get());
      if (an && an->annotation == IteratorAnnotation::Parallel && an->iter_id == 0) cands.push_back(i);
    }
    if (cands.empty()) return std::nullopt;
    const size_t an_idx = cands[pick_index(cands.size(), rng)];
    const int stage = s.steps()[an_idx]->stage_id;
    size_t fuse_idx = an_idx;
    int old_count = 1;
    if (an_idx > 0)
      if (auto* fu = dynamic_cast<const FuseStep*>(s.steps()[an_idx - 1].get()); fu && fu->stage_id == stage && fu->iter_ids.front() == 0) {
        fuse_idx = an_idx - 1;
        old_count = static_cast<int>(fu->iter_ids.size());
      }
    std::optional<State> before = replayed(s, std::vector<StepRef>(s.steps().begin(), s.steps().begin() + static_cast<long>(fuse_idx)));
    if (!before) return std::nullopt;
    const Stage& st = before->stage(stage);
    int max_count = 0;
    int64_t product = 1;
    for (size_t k = 0; k < st.iters.size(); ++k) {
      const IterNode& n = st.node_of(static_cast<int>(k));
      if (n.kind != IteratorKind::Spatial || product * n.extent > static_cast<int64_t>(p.cores) * 64) break;
      product *= n.extent;
      ++max_count;
    }
    if (max_count < 1) return std::nullopt;
    const int count = std::uniform_int_distribution<int>(1, max_count)(rng);
    if (count == old_count) return std::nullopt;
    std::vector<StepRef> steps(s.steps().begin(), s.steps().begin() + static_cast<long>(fuse_idx));
    if (count > 1) {
      std::vector<int> ids;
      for (int k = 0; k < count; ++k) ids.push_back(k);
      steps.push_back(std::make_shared<FuseStep>(stage, ids));
    }
    steps.push_back(s.steps()[an_idx]);
    const int shift = old_count - count;  // later loop ids of this stage move by this much
    for (size_t i = an_idx + 1; i < s.steps().size(); ++i) {
      nlohmann::json j = s.steps()[i]->to_json();
      const std::string prefix = j[0].get<std::string>();
      auto renumber = [&](nlohmann::json& v) {
        if (v.get<int>() > 0) v = v.get<int>() - shift;
      };
      if (j[1].get<int>() == stage && (prefix == "AN" || prefix == "PR" || prefix == "SP" || prefix == "FSP" ||
                                       prefix == "FFSP" || prefix == "SA" || prefix == "RF"))
        renumber(j[2]);
      if (j[1].get<int>() == stage && prefix == "FU")
        for (auto& v : j[2]) renumber(v);
      if (j[1].get<int>() == stage && prefix == "RE") return std::nullopt;  // a reorder after parallel: leave it
      if (prefix == "CA" && j[2].get<int>() == stage) renumber(j[3]);
      steps.push_back(step_from_json(j));
    }
    return replayed(s, steps);
  }
};

}  // namespace

const std::vector<std::unique_ptr<MutationRule>>& cpu_mutation_rules() {
  static const auto rules = [] {
    std::vector<std::unique_ptr<MutationRule>> r;
    r.push_back(std::make_unique<MutateTileSize>());
    r.push_back(std::make_unique<MutateAutoUnroll>());
    r.push_back(std::make_unique<MutateComputeLocation>());
    r.push_back(std::make_unique<MutateParallel>());
    r.push_back(std::make_unique<MutateVectorAxis>());
    return r;
  }();
  return rules;
}

std::optional<State> mutate(const State& s, const SearchParams& p, Rng& rng) {
  const auto& rules = cpu_mutation_rules();
  std::vector<double> weights;
  for (const auto& r : rules) weights.push_back(r->weight());
  std::discrete_distribution<size_t> draw(weights.begin(), weights.end());
  for (int attempt = 0; attempt < 8; ++attempt)
    if (auto next = rules[draw(rng)]->apply(s, p, rng)) return next;
  return std::nullopt;
}

}  // namespace kiln::sketch
