// Register-tile seeds: deterministic tile sizes for the multi-level tiled sketches.
#include "scheduler/sketch/seed_programs.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "scheduler/sketch/init_rules.h"
#include "scheduler/sketch/packing.h"
#include "scheduler/state/infer_bound.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/steps/attachments.h"
#include "scheduler/state/steps/cache_steps.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/pragma_step.h"
#include "scheduler/state/steps/rfactor_step.h"
#include "scheduler/state/steps/split_step.h"

namespace kiln::sketch {

using namespace state;

namespace {

// The unchosen splits of one tiled stage, by step index: spatial loops (three inner lengths, SSRSRS)
// in loop order, then reduction loops (one inner length).
struct TiledStage {
  std::vector<size_t> spatial, reduce;
};

struct TileChoice {
  int64_t vector_tile;  // the innermost spatial loop's inner length (its vector loop)
  size_t row_from_end;  // which other spatial loop gets unrolled rows: 1 = the one just outside it
  int64_t rows;
  bool blocked;  // a middle level of columns and a reduction block sized for the cache
  // > 0: a packed variant. The right-hand operand's block of `pack_reduce` reduction steps by the
  // vector tile is copied into a contiguous buffer (cache-read at the outer reduction loop) and reused
  // by a middle level of about 128 rows. Its rows, a whole row of the tensor apart, would otherwise
  // fall into the same few cache sets.
  int64_t pack_reduce = 0;
  // > 0: a second loop with unrolled rows, `outer_rows` of the loop `outer_from_end` from the vector
  // loop: a two-dimensional register tile, as a blocked convolution's output channel blocks x its
  // columns (each input value loaded once for several channel blocks, each weight vector once for
  // several columns).
  int64_t outer_rows = 0;
  size_t outer_from_end = 0;
};

int64_t largest_divisor_at_most(int64_t n, int64_t at_most) {
  for (int64_t d = std::min(n, std::max<int64_t>(at_most, 1)); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

// A register tile's length along a loop of `extent`: the largest divisor up to `want`, or `want` itself
// (the last tile guarded) when no divisor reaches half of it, as for a prime extent such as 109.
int64_t tile_length(int64_t extent, int64_t want) {
  const int64_t d = largest_divisor_at_most(extent, want);
  return 2 * d >= std::min(want, extent) ? d : std::min(want, extent);
}

// The vector loop's tile: whole vectors where it can be. A divisor that is not a multiple of the
// vector width compiles to a ragged chain (28 lanes: 16 + 8 + 4, 58% of the lanes busy; a depthwise
// conv's 56-wide rows made the seeds 2.3x slower than the default schedule). So a divisor in whole
// vectors, else a row of at most two tiles whole (56: three vectors and a half), else whole vectors
// with the last tile guarded.
int64_t vector_tile_length(int64_t extent, int64_t want, int64_t lanes) {
  for (int64_t d = want / lanes * lanes; d >= lanes; d -= lanes)
    if (extent % d == 0) return d;
  if (extent <= 2 * want) return extent;
  return want % lanes == 0 ? want : tile_length(extent, want);
}

// nullopt when the sketch is not (only) SSRSRS multi-level tiling with unchosen lengths.
std::optional<std::map<int, TiledStage>> tiled_stages(const State& sketch) {
  std::map<int, TiledStage> stages;
  const std::vector<StepRef>& steps = sketch.steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    // An rfactor's sketch is not a register tile; a packing sketch's copy is what the packed seeds add.
    if (dynamic_cast<const RfactorStep*>(steps[i].get()) || dynamic_cast<const CacheReadStep*>(steps[i].get())) return std::nullopt;
    auto* sp = dynamic_cast<const SplitStep*>(steps[i].get());
    if (!sp || std::all_of(sp->lengths.begin(), sp->lengths.end(), [](const auto& l) { return l.has_value(); })) continue;
    if (sp->lengths.size() == 3) stages[sp->stage_id].spatial.push_back(i);
    else if (sp->lengths.size() == 1) stages[sp->stage_id].reduce.push_back(i);
    else return std::nullopt;
  }
  if (stages.empty()) return std::nullopt;
  for (const auto& [id, t] : stages)
    if (t.spatial.empty()) return std::nullopt;
  return stages;
}

std::vector<std::optional<int64_t>> lengths(std::initializer_list<int64_t> l) { return {l.begin(), l.end()}; }

// Stage `tiled` (multi-level tiled, nothing attached yet) with its right-hand operand copied per
// block: the input it reads whose last index follows the vector loop's axis and no index the row
// axis's, cache-read and computed at the last loop of the outer reduction level; a weight whose
// layout is rewritten (steps/layout_rewrite_step.h) is not copied. nullopt when no input reads
// that way.
std::optional<State> with_packed_operand(const State& tiled, int stage, size_t row_from_end) {
  const Stage& st = tiled.stage(stage);
  const int operand = right_hand_operand(tiled, stage, row_from_end);
  if (operand < 0) return std::nullopt;
  // A weight whose layout is rewritten is packed when the program is compiled: the tiling alone.
  if (tiled.stage(operand).layout_rewrite) return tiled;
  // The outer reduction level: the run of reduction loops that starts at the first one.
  int at = -1;
  for (int k = 0; k < static_cast<int>(st.iters.size()); ++k) {
    const bool reduce = st.node_of(k).kind != IteratorKind::Spatial;
    if (reduce) at = k;
    else if (at >= 0) break;
  }
  if (at < 0) return std::nullopt;
  State s = tiled;
  s.apply(std::make_shared<CacheReadStep>(operand, kPackScope, std::vector<int>{stage}));
  s.apply(std::make_shared<ComputeAtStep>(operand + 1, stage + 1, at));
  return s;
}

std::optional<State> with_choice(const State& sketch, const std::map<int, TiledStage>& stages, const TileChoice& c, int64_t lanes) {
  std::vector<StepRef> steps = sketch.steps();
  auto set = [&](size_t i, std::vector<std::optional<int64_t>> ls) {
    auto* sp = dynamic_cast<const SplitStep*>(steps[i].get());
    steps[i] = std::make_shared<SplitStep>(sp->stage_id, sp->iter_id, sp->extent, std::move(ls), sp->inner_to_outer);
  };
  auto extent = [&](size_t i) { return dynamic_cast<const SplitStep*>(steps[i].get())->extent; };
  for (const auto& [id, t] : stages) {
    if (c.row_from_end >= t.spatial.size() && t.spatial.size() > 1) return std::nullopt;
    for (size_t k = 0; k + 1 < t.spatial.size(); ++k) set(t.spatial[k], lengths({1, 1, 1}));
    const size_t vec = t.spatial.back();
    const int64_t cols = vector_tile_length(extent(vec), c.vector_tile, lanes);
    const int64_t col_blocks = c.blocked ? largest_divisor_at_most(extent(vec) / cols, 256 / cols) : 1;
    set(vec, lengths({1, col_blocks, cols}));
    if (t.spatial.size() > 1) {
      const size_t row = t.spatial[t.spatial.size() - 1 - c.row_from_end];
      const int64_t rows = tile_length(extent(row), c.rows);
      const int64_t row_blocks = c.pack_reduce ? largest_divisor_at_most(extent(row) / rows, 128 / rows) : 1;
      set(row, lengths({1, row_blocks, rows}));
    }
    if (c.outer_rows > 0) {
      if (c.outer_from_end <= c.row_from_end || c.outer_from_end >= t.spatial.size()) return std::nullopt;
      const size_t outer = t.spatial[t.spatial.size() - 1 - c.outer_from_end];
      set(outer, lengths({1, 1, tile_length(extent(outer), c.outer_rows)}));
    }
    for (size_t k = 0; k < t.reduce.size(); ++k) {
      const int64_t e = extent(t.reduce[k]);
      const int64_t block = c.pack_reduce ? c.pack_reduce : c.blocked ? 256 : e;
      set(t.reduce[k], lengths({k == 0 ? largest_divisor_at_most(e, block) : e}));
    }
  }
  try {
    State tiled = replay(sketch.dag_ptr(), steps);
    if (!c.pack_reduce) return tiled;
    if (stages.size() != 1) return std::nullopt;
    return with_packed_operand(tiled, stages.begin()->first, c.row_from_end);
  } catch (const ScheduleError&) {
    return std::nullopt;
  }
}

const InitRule& init_rule(const char* name) {
  for (const auto& r : cpu_init_rules())
    if (std::string(r->name()) == name) return *r;
  throw ScheduleError(fmt::format("no init rule '{}'", name));
}

// How often the body of loop `k` of stage `target` runs: its loops out to it, and the loops its stage
// is computed in.
int64_t iterations_to(const std::vector<Stage>& inferred, int target, int k) {
  int64_t n = 1;
  for (int cur = target, upto = k; cur >= 0;) {
    const Stage& st = inferred[static_cast<size_t>(cur)];
    for (int j = 0; j <= upto; ++j) n *= std::max<int64_t>(st.node_of(j).extent, 1);
    if (st.compute_at != ComputeAtKind::Iter) break;
    const Stage& parent = inferred[static_cast<size_t>(st.attach_stage)];
    upto = parent.iter_of_node(st.attach_node);
    cur = st.attach_stage;
  }
  return n;
}

// `tiled` with each stage at root that feeds a tiled stage (a padded input) computed at the outermost
// spatial loop where it is a quarter of its whole or less and not made again for other iterations: a
// depthwise conv's padded channel plane per channel (what the default schedule does, padded_planes.h).
// A dense conv reads its whole padded input at every output channel, so its pad stays at root. nullopt when no stage moves.
std::optional<State> with_planes(const State& tiled) {
  State cur = tiled;
  bool moved = false;
  for (int i = static_cast<int>(cur.stages().size()) - 1; i >= 0; --i) {
    const Stage& st = cur.stage(i);
    if (st.kind != StageKind::Compute || st.compute_at != ComputeAtKind::Root || !st.relations.empty() ||
        st.op->reducer != te::Reducer::None || is_output_stage(cur, i) || has_attached(cur, i))
      continue;
    std::vector<std::pair<int, int>> where = compute_location_candidates(cur, i);
    // Outermost first: the loops of the stage the consumer is computed in, then the consumer's.
    if (where.empty()) continue;
    const int consumer = consumers_through_inlined(cur, i)[0];
    std::stable_partition(where.begin(), where.end(), [&](const auto& c) { return c.first != consumer; });
    for (const auto& [target, k] : where) {
      // Spatial loops only: inside a reduction loop the copy would be made again for every tile.
      if (cur.stage(target).node_of(k).kind != IteratorKind::Spatial) continue;
      State next = cur;
      try {
        next.apply(std::make_shared<ComputeAtStep>(i, target, k));
      } catch (const ScheduleError&) {
        continue;
      }
      const std::vector<Stage> inferred = infer_bound(next);
      int64_t part = 1, all = 1;
      const Stage& bounded = inferred[static_cast<size_t>(i)];
      for (int r = 0; r < bounded.num_roots; ++r) {
        part *= bounded.nodes[static_cast<size_t>(r)].extent;
        all *= st.root_domain[static_cast<size_t>(r)];
      }
      // Computed that often, the copy must not be made again for other iterations (a dense conv's
      // rows per output channel block): at most a quarter of a halo more than the whole.
      const double copies = static_cast<double>(part) * static_cast<double>(iterations_to(inferred, target, k));
      if (4 * part > all || copies > 1.25 * static_cast<double>(all)) continue;
      cur = std::move(next);
      moved = true;
      break;
    }
  }
  if (!moved) return std::nullopt;
  return cur;
}

// The other init rules as a random program gets them, except two: untiled stages stay at root, as
// in the default schedule (a convolution's padded input inlined back into its inner loop would cost
// the seed ~5x), and a fixed unroll limit large enough that the rows of a register tile are unrolled.
std::optional<State> complete(const State& tiled, const SearchParams& p, uint64_t seed) {
  Rng rng(seed);
  std::optional<State> cur = init_rule("parallel").apply(tiled, p, rng);
  if (!cur) return std::nullopt;
  for (int i = 0; i < static_cast<int>(cur->stages().size()); ++i) {
    const Stage& st = cur->stage(i);
    if (st.kind != StageKind::Compute || st.compute_at == ComputeAtKind::Inlined || st.iters.empty() || st.op->reduce_axes.empty()) continue;
    cur->apply(std::make_shared<PragmaStep>(i, 0, "auto_unroll_max_step$512"));
  }
  return init_rule("vectorize").apply(*cur, p, rng);
}

}  // namespace

std::vector<State> register_tile_seeds(const std::vector<State>& sketches, const SearchParams& p) {
  const int64_t lanes = std::max(1, p.vector_lanes);
  // The default's tiles and the packed ones first (each round measures the first few), then the rest.
  std::vector<TileChoice> choices = {{2 * lanes, 1, 4, false}};
  // Two-dimensional tiles of one vector (a blocked layout's channel block; none for a matmul): 7 or 6
  // columns by 4 channel blocks (the default schedule's conv tile), or by 2.
  for (int64_t outer_rows : {4, 2})
    for (int64_t rows : {7, 6}) choices.push_back({lanes, 1, rows, false, 0, outer_rows, 3});
  choices.push_back({2 * lanes, 1, 4, false, 128});
  choices.push_back({2 * lanes, 1, 8, false, 256});
  for (bool blocked : {false, true})
    for (int64_t vector_tile : {2 * lanes, lanes})
      for (size_t row_from_end : {size_t{1}, size_t{2}})
        for (int64_t rows : {4, 8})
          if (blocked || vector_tile != 2 * lanes || row_from_end != 1 || rows != 4) choices.push_back({vector_tile, row_from_end, rows, blocked});
  choices.push_back({2 * lanes, 1, 8, false, 128});
  choices.push_back({2 * lanes, 1, 4, false, 256});
  std::vector<State> out;
  std::set<std::string> seen;
  for (const TileChoice& c : choices)
    for (size_t k = 0; k < sketches.size(); ++k) {
      const auto stages = tiled_stages(sketches[k]);
      if (!stages) continue;
      try {
        std::optional<State> tiled = with_choice(sketches[k], *stages, c, lanes);
        if (!tiled) continue;
        // Padded planes first where there are any: the default schedule's way for such ops.
        for (std::optional<State> variant : {with_planes(*tiled), tiled}) {
          std::optional<State> s = variant ? complete(*variant, p, 0x5eed0000u + out.size()) : std::nullopt;
          if (s && seen.insert(print_state(*s)).second) out.push_back(std::move(*s));
        }
      } catch (const ScheduleError&) {
      }
    }
  return out;
}

}  // namespace kiln::sketch
