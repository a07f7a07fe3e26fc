// The CPU init-population rules.
#include "scheduler/sketch/init_rules.h"

#include <fmt/format.h>

#include "scheduler/sketch/packing.h"
#include "scheduler/sketch/vector_axis.h"
#include "scheduler/state/infer_bound.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/step.h"
#include "scheduler/state/steps/annotation_step.h"
#include "scheduler/state/steps/attachments.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/fuse_step.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/rfactor_step.h"
#include "scheduler/state/steps/split_step.h"

namespace kiln::sketch {

using namespace state;

namespace {

std::vector<int64_t> divisors(int64_t n, int64_t at_most) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n && k <= at_most; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t k = 2; k * k <= n; ++k)
    if (n % k == 0) return false;
  return true;
}

template <typename T>
const T& pick(const std::vector<T>& v, Rng& rng) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

bool coin(double p, Rng& rng) { return std::bernoulli_distribution(p)(rng); }

bool is_computed(const Stage& st) { return st.kind == StageKind::Compute && st.compute_at != ComputeAtKind::Inlined; }

bool has_attached_at(const State& s, int stage, int node) {
  for (const Stage& st : s.stages())
    if (st.compute_at == ComputeAtKind::Iter && st.attach_stage == stage && st.attach_node == node) return true;
  return false;
}

class FillTileSize : public InitRule {
 public:
  const char* name() const override { return "fill-tile-size"; }
  std::optional<State> apply(const State& s, const SearchParams& p, Rng& rng) const override {
    std::vector<StepRef> steps = s.steps();
    bool changed = false;
    for (size_t i = 0; i < steps.size(); ++i) {
      StepRef& step = steps[i];
      auto* sp = dynamic_cast<const SplitStep*>(step.get());
      if (!sp) continue;
      bool undefined = false;
      for (const auto& l : sp->lengths) undefined = undefined || !l;
      // The split an rfactor step factors out is drawn like any tile (the sketch holds a placeholder 1).
      auto* rf = i + 1 < steps.size() ? dynamic_cast<const RfactorStep*>(steps[i + 1].get()) : nullptr;
      if (!undefined && !(rf && rf->stage_id == sp->stage_id)) continue;
      std::vector<int64_t> ls = sample_split_lengths(sp->extent, sp->lengths.size(), p.max_innermost_factor, rng);
      step = std::make_shared<SplitStep>(sp->stage_id, sp->iter_id, sp->extent,
                                         std::vector<std::optional<int64_t>>(ls.begin(), ls.end()), sp->inner_to_outer);
      changed = true;
    }
    if (!changed) return s;
    try {
      return replay(s.dag_ptr(), steps);
    } catch (const ScheduleError&) {
      return std::nullopt;
    }
  }
};

// Which spatial loop of each tiled stage's innermost level is its vector (vector_axis.h): the last
// axis's, as the tiling leaves it, half of the time; another one of the level's loops otherwise.
class ChooseVectorAxis : public InitRule {
 public:
  const char* name() const override { return "vector-axis"; }
  std::optional<State> apply(const State& s, const SearchParams&, Rng& rng) const override {
    State cur = s;
    for (const VectorAxisChoice& c : vector_axis_choices(s)) {
      if (coin(0.5, rng)) continue;
      if (auto next = with_vector_axis(cur, c, pick(c.others, rng))) cur = std::move(*next);
    }
    return cur;
  }
};

// Where each untiled stage is computed: at root, inlined, or inside a loop of its only consumer.
class ChangeComputeLocation : public InitRule {
 public:
  const char* name() const override { return "change-compute-location"; }
  std::optional<State> apply(const State& s, const SearchParams&, Rng& rng) const override {
    State cur = s;
    for (int i = static_cast<int>(cur.stages().size()) - 1; i >= 0; --i) {
      const Stage& st = cur.stage(i);
      if (!is_computed(st) || st.compute_at != ComputeAtKind::Root || !st.relations.empty() || is_output_stage(cur, i)) continue;
      if (has_attached(cur, i)) continue;
      std::vector<StepRef> options = {nullptr};  // stay at root
      // Inlining a packing copy undoes it: the sketch without the copy is that program.
      if (st.op->reducer == te::Reducer::None && !is_packing_stage(cur, i)) options.push_back(std::make_shared<ComputeInlineStep>(i));
      for (const auto& [target, k] : compute_location_candidates(cur, i))
        options.push_back(std::make_shared<ComputeAtStep>(i, target, k));
      const StepRef& choice = pick(options, rng);
      if (!choice) continue;
      try {
        State next = cur;
        next.apply(choice);
        cur = std::move(next);
      } catch (const ScheduleError&) {
      }
    }
    return cur;
  }
};

// The outer spatial loops of every root stage fused into one parallel loop of up to cores x 16.
class AnnotateParallel : public InitRule {
 public:
  const char* name() const override { return "parallel"; }
  std::optional<State> apply(const State& s, const SearchParams& p, Rng&) const override {
    State cur = s;
    std::vector<Stage> inferred = infer_bound(cur);
    for (int i = 0; i < static_cast<int>(cur.stages().size()); ++i) {
      const Stage& st = inferred[static_cast<size_t>(i)];
      if (!is_computed(st) || st.compute_at != ComputeAtKind::Root || st.iters.empty()) continue;
      int count = 0;
      int64_t product = 1;
      for (size_t k = 0; k < st.iters.size(); ++k) {
        const IterNode& n = st.node_of(static_cast<int>(k));
        if (n.kind != IteratorKind::Spatial || st.iters[k].annotation != IteratorAnnotation::None) break;
        // Loops of extent 1 (a batch of one) do not count: the next loop still joins.
        if (count > 0 && product > 1 && product * n.extent > static_cast<int64_t>(p.cores) * 16) break;
        product *= n.extent;
        ++count;
        if (has_attached_at(cur, i, st.iters[k].node)) break;
      }
      if (count == 0 || product <= 1) continue;
      try {
        State next = cur;
        if (count > 1) {
          std::vector<int> ids;
          for (int k = 0; k < count; ++k) ids.push_back(k);
          next.apply(std::make_shared<FuseStep>(i, ids));
        }
        next.apply(std::make_shared<AnnotationStep>(i, 0, IteratorAnnotation::Parallel));
        cur = std::move(next);
        inferred = infer_bound(cur);
      } catch (const ScheduleError&) {
      }
    }
    return cur;
  }
};

class AutoUnroll : public InitRule {
 public:
  const char* name() const override { return "auto-unroll"; }
  std::optional<State> apply(const State& s, const SearchParams&, Rng& rng) const override {
    static const std::vector<int64_t> steps = {0, 16, 64, 512};
    State cur = s;
    for (int i = 0; i < static_cast<int>(cur.stages().size()); ++i) {
      const Stage& st = cur.stage(i);
      if (!is_computed(st) || st.iters.empty() || st.op->reduce_axes.empty()) continue;
      cur.apply(std::make_shared<PragmaStep>(i, 0, fmt::format("auto_unroll_max_step${}", pick(steps, rng))));
    }
    return cur;
  }
};

// The innermost spatial loops of every stage fused (a random number of them, up to the vector width)
// and vectorized.
class Vectorize : public InitRule {
 public:
  const char* name() const override { return "vectorize"; }
  std::optional<State> apply(const State& s, const SearchParams& p, Rng& rng) const override {
    State cur = s;
    for (int i = 0; i < static_cast<int>(cur.stages().size()); ++i) {
      std::vector<Stage> inferred = infer_bound(cur);
      const Stage& st = inferred[static_cast<size_t>(i)];
      if (!is_computed(st) || st.iters.empty()) continue;
      int count = 0;
      int64_t product = 1;
      for (size_t k = st.iters.size(); k-- > 0;) {
        const IterNode& n = st.node_of(static_cast<int>(k));
        if (n.kind != IteratorKind::Spatial || st.iters[k].annotation != IteratorAnnotation::None) break;
        if (has_attached_at(cur, i, st.iters[k].node)) break;
        if (product * n.extent > p.vector_lanes && count > 0) break;
        product *= n.extent;
        ++count;
      }
      if (count == 0) continue;
      const int take = std::uniform_int_distribution<int>(1, count)(rng);
      const int first = static_cast<int>(st.iters.size()) - take;
      int64_t extent = 1;
      for (int k = first; k < static_cast<int>(st.iters.size()); ++k) extent *= st.node_of(k).extent;
      if (extent <= 1) continue;
      try {
        State next = cur;
        if (take > 1) {
          std::vector<int> ids;
          for (int k = first; k < static_cast<int>(st.iters.size()); ++k) ids.push_back(k);
          next.apply(std::make_shared<FuseStep>(i, ids));
        }
        next.apply(std::make_shared<AnnotationStep>(i, first, IteratorAnnotation::Vectorize));
        cur = std::move(next);
      } catch (const ScheduleError&) {
      }
    }
    return cur;
  }
};

}  // namespace

std::vector<int64_t> sample_split_lengths(int64_t extent, size_t n_lengths, int64_t max_innermost, Rng& rng) {
  int64_t e = std::max<int64_t>(extent, 1);
  if ((e > 8 && is_prime(e) && coin(0.7, rng)) || (e > 8 && coin(0.1, rng))) {
    const int64_t m = pick(std::vector<int64_t>{4, 8, 16}, rng);
    if (m < e) e = (e + m - 1) / m * m;
  }
  std::vector<int64_t> lengths(n_lengths, 1);
  int64_t rest = e;
  for (size_t k = n_lengths; k-- > 0;) {
    const int64_t d = pick(divisors(rest, k + 1 == n_lengths ? max_innermost : rest), rng);
    lengths[k] = d;
    rest /= d;
  }
  return lengths;
}

std::vector<std::pair<int, int>> compute_location_candidates(const State& s, int stage) {
  const std::vector<int> consumers = consumers_through_inlined(s, stage);
  if (consumers.size() != 1 || !is_computed(s.stage(consumers[0]))) return {};
  const int c = consumers[0];
  const std::vector<Stage> inferred = infer_bound(s);  // loop extents as computed (an attached tile's are its own)
  std::vector<std::pair<int, int>> out;
  // A loop of one iteration is no place of its own (and would block a parallel loop); an unrolled one
  // is not entered; a loop where something is computed already is the innermost candidate.
  auto walk = [&](int target, bool into_reduction) {
    const Stage& t = inferred[static_cast<size_t>(target)];
    bool reduced = false;
    for (int k = 0; k < static_cast<int>(t.iters.size()); ++k) {
      const bool spatial = t.node_of(k).kind == IteratorKind::Spatial;
      if (!spatial && !into_reduction) break;
      if (spatial && reduced) break;  // the inner tile levels
      reduced = reduced || !spatial;
      if (t.iters[static_cast<size_t>(k)].annotation == IteratorAnnotation::Unroll) break;
      if (t.node_of(k).extent == 1) continue;
      const bool attached = has_attached_at(s, target, t.iters[static_cast<size_t>(k)].node);
      if (attached && target != c) break;  // the parent's loop holding the consumer: not outside it
      out.emplace_back(target, k);
      if (attached) break;
    }
  };
  // The consumer's loops, into its first reduction level when it is tiled (Ansor's rule; a packing
  // copy is then made per block of the reduction).
  walk(c, !s.stage(c).relations.empty());
  // The loops of the stage the consumer is computed in, outside the consumer's.
  if (s.stage(c).compute_at == ComputeAtKind::Iter) walk(s.stage(c).attach_stage, false);
  return out;
}

std::optional<State> with_split_lengths(const State& s, size_t step, const std::vector<int64_t>& lengths) {
  std::vector<StepRef> steps = s.steps();
  auto* sp = dynamic_cast<const SplitStep*>(steps.at(step).get());
  if (!sp) return std::nullopt;
  steps[step] = std::make_shared<SplitStep>(sp->stage_id, sp->iter_id, sp->extent,
                                            std::vector<std::optional<int64_t>>(lengths.begin(), lengths.end()), sp->inner_to_outer);
  try {
    return replay(s.dag_ptr(), steps);
  } catch (const ScheduleError&) {
    return std::nullopt;
  }
}

const std::vector<std::unique_ptr<InitRule>>& cpu_init_rules() {
  static const auto rules = [] {
    std::vector<std::unique_ptr<InitRule>> r;
    r.push_back(std::make_unique<FillTileSize>());
    r.push_back(std::make_unique<ChooseVectorAxis>());
    r.push_back(std::make_unique<ChangeComputeLocation>());
    r.push_back(std::make_unique<AnnotateParallel>());
    r.push_back(std::make_unique<AutoUnroll>());
    r.push_back(std::make_unique<Vectorize>());
    return r;
  }();
  return rules;
}

std::optional<State> complete_sketch(const State& sketch, const SearchParams& p, Rng& rng) {
  std::optional<State> cur = sketch;
  for (const auto& rule : cpu_init_rules()) {
    cur = rule->apply(*cur, p, rng);
    if (!cur) return std::nullopt;
  }
  return cur;
}

}  // namespace kiln::sketch
