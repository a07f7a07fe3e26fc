#include "backends/package/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "frontend/ir/error.h"

namespace kiln::package {

namespace {

int64_t round_up(int64_t v, int64_t align) { return (v + align - 1) / align * align; }
int64_t slot_bytes(const LiveRange& r, int64_t align) { return round_up(std::max<int64_t>(r.bytes, 1), align); }

// Places the ranges in `order`, each at the smallest gap among the already placed ranges it overlaps
// in time that holds it (else above them all); returns the offsets and sets `size`.
std::vector<int64_t> best_fit(const std::vector<LiveRange>& ranges, const std::vector<size_t>& order, int64_t align,
                              int64_t* size) {
  std::vector<int64_t> offsets(ranges.size(), 0);
  std::vector<size_t> placed;
  *size = 0;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    const int64_t bytes = slot_bytes(r, align);
    // Occupied intervals of tensors whose lifetimes overlap this one, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (!(ranges[j].last < r.first || r.last < ranges[j].first))
        busy.emplace_back(offsets[j], offsets[j] + slot_bytes(ranges[j], align));
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo - cursor >= bytes && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best < 0) best = cursor;
    offsets[i] = best;
    *size = std::max(*size, best + bytes);
    placed.push_back(i);
  }
  return offsets;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<LiveRange>& ranges, int64_t align) {
  MemoryPlan plan;
  std::vector<size_t> base(ranges.size());
  std::iota(base.begin(), base.end(), 0);
  auto sorted_by = [&](auto key) {
    std::vector<size_t> order = base;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(ranges[a]) > key(ranges[b]); });
    return order;
  };
  const std::vector<std::vector<size_t>> orders = {
      sorted_by([](const LiveRange& r) { return r.bytes; }),                            // largest first
      sorted_by([](const LiveRange& r) { return -r.first; }),                           // first use first
      sorted_by([](const LiveRange& r) { return r.bytes * (r.last - r.first + 1); }),  // most byte-steps first
  };
  plan.size = INT64_MAX;
  for (const std::vector<size_t>& order : orders) {
    int64_t size = 0;
    std::vector<int64_t> offsets = best_fit(ranges, order, align, &size);
    if (size < plan.size) {
      plan.size = size;
      plan.offsets = std::move(offsets);
    }
  }
  std::map<int64_t, int64_t> delta;
  for (const LiveRange& r : ranges) {
    delta[r.first] += slot_bytes(r, align);
    delta[r.last + 1] -= slot_bytes(r, align);
  }
  int64_t live = 0;
  for (const auto& [t, d] : delta) {
    live += d;
    plan.lower_bound = std::max(plan.lower_bound, live);
  }
  return plan;
}

namespace {

// The buffer whose bytes parameter `i` occupies (itself, or the outermost `within`) and where in them.
std::pair<size_t, int64_t> outermost(const lower::ModelProgram& prog, size_t i,
                                     const std::map<const lower::Buffer*, size_t>& param_of) {
  int64_t offset = 0;
  for (size_t hops = 0; prog.params[i].within; ++hops) {
    auto it = param_of.find(prog.params[i].within.get());
    if (it == param_of.end() || hops > prog.params.size() || prog.params[it->second].kind != lower::ModelParam::Kind::Workspace)
      throw InternalError("plan_model_memory: '" + prog.func.params[i]->name + "' lies within no workspace buffer");
    offset += prog.params[i].offset_within;
    i = it->second;
  }
  return {i, offset};
}

// Packs the outermost workspace buffers (`steps`: first and last statement of each), those of each
// chain of `joined` pairs as one buffer; offsets are per outermost buffer.
struct Packing {
  std::map<size_t, int64_t> offset;
  MemoryPlan plan;
};

Packing pack(const lower::ModelProgram& prog, const std::map<size_t, std::pair<int, int>>& steps,
             const std::vector<lower::InPlaceWrite>& joined) {
  std::map<size_t, size_t> head;  // buffer -> the first of its chain
  for (const auto& [outer, range] : steps) head[outer] = outer;
  auto find = [&](size_t i) {
    while (head.at(i) != i) i = head.at(i);
    return i;
  };
  for (const lower::InPlaceWrite& w : joined) head[find(w.written)] = find(w.read);
  std::map<size_t, std::pair<int, int>> group_steps;
  std::map<size_t, int64_t> group_bytes;
  for (const auto& [outer, range] : steps) {
    const size_t g = find(outer);
    auto [it, fresh] = group_steps.try_emplace(g, range);
    if (!fresh) it->second = {std::min(it->second.first, range.first), std::max(it->second.second, range.second)};
    group_bytes[g] = std::max(group_bytes[g], prog.params[outer].bytes);
  }
  // Ranges listed in the order their buffers come alive: the planner breaks ties between equal sizes
  // by that order.
  std::vector<size_t> groups;
  for (const auto& [g, range] : group_steps) groups.push_back(g);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](size_t a, size_t b) { return group_steps.at(a).first < group_steps.at(b).first; });
  std::vector<LiveRange> ranges;
  for (size_t g : groups) ranges.push_back({group_bytes.at(g), group_steps.at(g).first, group_steps.at(g).second});
  Packing p;
  p.plan = plan_memory(ranges, kWorkspaceAlign);
  std::map<size_t, int64_t> group_offset;
  for (size_t k = 0; k < groups.size(); ++k) group_offset[groups[k]] = p.plan.offsets[k];
  for (const auto& [outer, range] : steps) p.offset[outer] = group_offset.at(find(outer));
  return p;
}

// The permitted pairs a plan can join: each buffer gives its bytes to one output and takes another's
// once (first come in statement order), and both are outermost workspace buffers of the plan.
std::vector<lower::InPlaceWrite> joinable(const std::vector<lower::InPlaceWrite>& in_place,
                                          const std::map<size_t, std::pair<int, int>>& steps) {
  std::set<size_t> gives, takes;
  std::vector<lower::InPlaceWrite> out;
  for (const lower::InPlaceWrite& w : in_place) {
    if (!steps.count(w.read) || !steps.count(w.written) || gives.count(w.read) || takes.count(w.written)) continue;
    gives.insert(w.read);
    takes.insert(w.written);
    out.push_back(w);
  }
  return out;
}

}  // namespace

ModelMemoryPlan plan_model_memory(const lower::ModelProgram& prog, const std::vector<lower::InPlaceWrite>& in_place) {
  std::map<const lower::Buffer*, size_t> param_of;
  for (size_t i = 0; i < prog.params.size(); ++i) param_of[prog.func.params[i].get()] = i;
  // A buffer within another takes no bytes of its own; the outer one lives as long as any of them.
  std::vector<std::pair<size_t, int64_t>> place(prog.params.size());
  std::map<size_t, std::pair<int, int>> steps;  // outermost workspace buffer -> first and last statement
  for (size_t i = 0; i < prog.params.size(); ++i) {
    if (prog.params[i].kind != lower::ModelParam::Kind::Workspace) continue;
    place[i] = outermost(prog, i, param_of);
    const auto [outer, offset] = place[i];
    if (offset < 0 || offset + prog.params[i].bytes > prog.params[outer].bytes)
      throw InternalError("plan_model_memory: '" + prog.func.params[i]->name + "' does not fit within '" +
                          prog.func.params[outer]->name + "'");
    const auto it = steps.try_emplace(outer, prog.params[i].first_step, prog.params[i].last_step).first;
    it->second = {std::min(it->second.first, prog.params[i].first_step), std::max(it->second.second, prog.params[i].last_step)};
  }
  Packing packing = pack(prog, steps, {});
  const std::vector<lower::InPlaceWrite> joined = joinable(in_place, steps);
  ModelMemoryPlan m;
  m.size_apart = packing.plan.size;
  if (!joined.empty()) {
    Packing with = pack(prog, steps, joined);
    if (with.plan.size < packing.plan.size) {
      packing = std::move(with);
      m.in_place = joined;
    }
  }
  m.offset_of_param.assign(prog.params.size(), -1);
  for (const auto& [outer, offset] : packing.offset) m.offset_of_param[outer] = offset;
  for (size_t i = 0; i < prog.params.size(); ++i)
    if (prog.params[i].kind == lower::ModelParam::Kind::Workspace && place[i].first != i)
      m.offset_of_param[i] = m.offset_of_param[place[i].first] + place[i].second;
  m.size = packing.plan.size;
  m.lower_bound = packing.plan.lower_bound;
  m.intermediates = static_cast<int>(steps.size());
  return m;
}

std::string print_model_memory_plan(const lower::ModelProgram& prog, const ModelMemoryPlan& plan) {
  std::string s = fmt::format("workspace {} bytes, peak-liveness lower bound {}, {} buffers, alignment {}{}\n", plan.size,
                              plan.lower_bound, plan.intermediates, kWorkspaceAlign,
                              plan.in_place.empty() ? "" : fmt::format(", {} written in place ({} bytes with all apart)", plan.in_place.size(), plan.size_apart));
  if (plan.size_in_given_order)
    s += fmt::format("subgraphs reordered for memory: {} bytes in the graph's order\n", plan.size_in_given_order);
  std::map<size_t, size_t> over;  // written -> read, of the in-place pairs used
  for (const lower::InPlaceWrite& w : plan.in_place) over[w.written] = w.read;
  std::vector<size_t> order;
  for (size_t i = 0; i < prog.params.size(); ++i)
    if (plan.offset_of_param[i] >= 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan.offset_of_param[a] < plan.offset_of_param[b]; });
  for (size_t i : order) {
    const lower::ModelParam& p = prog.params[i];
    s += fmt::format("  {:>10}  {} ({} bytes, statements {}..{}{}{})\n", plan.offset_of_param[i], prog.func.params[i]->name,
                     p.bytes, p.first_step, p.last_step, p.within ? ", within " + p.within->name : "",
                     over.count(i) ? ", over " + prog.func.params[over.at(i)]->name : "");
  }
  return s;
}

}  // namespace kiln::package
