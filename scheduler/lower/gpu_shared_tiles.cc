#include "scheduler/lower/gpu_shared_tiles.h"

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <tuple>

#include "frontend/ir/error.h"
#include "scheduler/te/affine.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {

int64_t GpuSharedTile::threads() const {
  int64_t n = 1;
  for (size_t a = 0; a < block.size(); ++a) n *= block[a] / thread_tile[a];
  return n;
}

namespace {

// FMAs per operand element fetched into shared memory below which a stage keeps the default schedule.
// ResNet-50 at batch 1 with 7 x 7 layers staged at about 1 FMA per element took 9.6 ms against 4.3
// without staging (H100, bench/RESULTS.md).
constexpr double kMinSharedReuse = 4;

// An operand of the reduction: a load whose index along dimension d is
// constant[d] + sum_a axis[d][a] * axis_a + sum_j reduce[d][j] * reduce_j.
struct Operand {
  Expr load;  // as the stage's body writes it
  std::vector<int64_t> constant;
  std::vector<std::vector<int64_t>> axis, reduce;  // [dimension][axis], [dimension][reduction axis]
};

std::optional<size_t> position_of(const std::vector<Expr>& vars, const te::ExprNode* v) {
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].get() == v) return i;
  return std::nullopt;
}

std::vector<Expr> reduce_vars(const te::Stage& s) {
  std::vector<Expr> v;
  for (const te::IterVar& r : s.reduce_axes) v.push_back(r.var);
  return v;
}

// The loads of `s` whose index depends on the reduction, each once; none when one of them is not
// affine in the stage's variables with non-negative coefficients.
std::optional<std::vector<Operand>> operands_of(const te::Stage& s) {
  const std::vector<Expr> rvars = reduce_vars(s);
  std::vector<Operand> out;
  bool affine = true;
  te::visit_loads(s.body, [&](const Expr& l) {
    if (!affine) return;
    if (std::none_of(rvars.begin(), rvars.end(), [&](const Expr& v) { return te::mentions(l, v.get()); })) return;
    for (const Operand& o : out)
      if (te::same_expr(o.load, l)) return;
    Operand o{l, {}, {}, {}};
    for (const Expr& index : l->args) {
      const te::Affine f = te::affine_form(index);
      std::vector<int64_t> ax(s.axes.size(), 0), rd(rvars.size(), 0);
      for (const auto& [atom, c] : f.terms) {
        if (c == 0) continue;
        const auto a = position_of(s.axes, atom.get()), r = position_of(rvars, atom.get());
        if (c < 0 || (!a && !r)) {
          affine = false;
          return;
        }
        (a ? ax[*a] : rd[*r]) += c;
      }
      o.constant.push_back(f.constant);
      o.axis.push_back(std::move(ax));
      o.reduce.push_back(std::move(rd));
    }
    out.push_back(std::move(o));
  });
  if (!affine || out.empty()) return std::nullopt;
  return out;
}

// The box of `o` a block reads per chunk: its extent along each dimension.
std::vector<int64_t> box_extents(const Operand& o, const te::Stage& s, const GpuSharedTile& t) {
  std::vector<int64_t> e;
  for (size_t d = 0; d < o.constant.size(); ++d) {
    int64_t x = 1;
    for (size_t a = 0; a < s.axes.size(); ++a) x += o.axis[d][a] * (t.block[a] - 1);
    for (size_t j = 0; j < s.reduce_axes.size(); ++j)
      x += o.reduce[d][j] * ((j == 0 ? t.k_chunk : s.reduce_axes[j].extent) - 1);
    e.push_back(x);
  }
  return e;
}

// Elements of a thread's register tile along axis a that lie next to each other (a group): 4 where the
// tile is a multiple of 4, so that a thread reads them from shared memory as one 16-byte vector (one
// ld.shared.v4 instead of four: the loads, not the FMAs, bounded an 8 x 8 tile of scalar loads).
constexpr int64_t kGroup = 4;
int64_t group_of(const GpuSharedTile& t, size_t a) {
  return t.thread_tile[a] % kGroup == 0 && t.block[a] / t.thread_tile[a] > 1 ? kGroup : 1;
}

struct BoxLayout {
  std::vector<int64_t> extents, pitches;
  int64_t elements = 0;  // padding included
};

// The box of `o` in shared memory: row-major, except that a dimension a grouped register tile walks
// with stride 1 (the vector dimension) goes innermost, its extent rounded up to a multiple of 4 so each
// group is one aligned vector. When that moves it (a transposed copy, as the rows of matmul's A), the
// fetch writes the box column by column, and 4 more elements per row spread those stores over the
// banks. Without a vector dimension, the innermost extent is padded to an odd number when the
// threads' fastest axis (the last) moves the index along another dimension only: consecutive threads
// would otherwise read elements an even stride apart.
BoxLayout box_layout(const Operand& o, const te::Stage& s, const GpuSharedTile& t) {
  BoxLayout b;
  b.extents = box_extents(o, s, t);
  const size_t rank = b.extents.size(), last_axis = s.axes.size() - 1;
  std::optional<size_t> vector_dim;
  if (dtype_size(o.load->tensor->dtype) == 4)
    for (size_t d = 0; d < rank && !vector_dim; ++d)
      for (size_t a = 0; a < s.axes.size() && !vector_dim; ++a)
        if (group_of(t, a) > 1 && o.axis[d][a] == 1) vector_dim = d;
  std::vector<size_t> order;  // outermost first
  for (size_t d = 0; d < rank; ++d)
    if (d != vector_dim) order.push_back(d);
  if (vector_dim) order.push_back(*vector_dim);
  bool outer_moves = false;
  for (size_t k = 0; k + 1 < rank; ++k) outer_moves |= o.axis[order[k]][last_axis] != 0;
  b.pitches.assign(rank, 1);
  int64_t stride = 1;
  for (size_t k = rank; k-- > 0;) {
    const size_t d = order[k];
    b.pitches[d] = stride;
    int64_t e = b.extents[d];
    if (k == rank - 1 && rank > 1) {
      if (vector_dim) e = (e + kGroup - 1) / kGroup * kGroup + (*vector_dim != rank - 1 ? kGroup : 0);
      else if (outer_moves && o.axis[d][last_axis] == 0 && e % 2 == 0) ++e;
    }
    stride *= e;
  }
  b.elements = stride;
  return b;
}

int64_t shared_bytes(const std::vector<Operand>& ops, const te::Stage& s, const GpuSharedTile& t) {
  int64_t bytes = 0;
  for (const Operand& o : ops) bytes += box_layout(o, s, t).elements * static_cast<int64_t>(dtype_size(o.load->tensor->dtype));
  return bytes;
}

// Registers a thread may hold per operand for the next chunk's elements (chunk prefetch): the copy's
// unrolled loops keep up to 16 (codegen unrolls no longer loop), so the held elements stay in registers;
// past that, a tile copies as before. A 128 x 128 tile of 256 threads with a chunk of 16 holds 8 + 8.
constexpr int64_t kMaxPrefetchRegisters = 16;

// Elements of each operand's box a thread copies per chunk.
std::vector<int64_t> copy_steps(const std::vector<Operand>& ops, const te::Stage& s, const GpuSharedTile& t) {
  std::vector<int64_t> steps;
  for (const Operand& o : ops) {
    int64_t elements = 1;
    for (int64_t e : box_extents(o, s, t)) elements *= e;
    steps.push_back((elements + t.threads() - 1) / t.threads());
  }
  return steps;
}

// Whether chunk prefetch applies to tile `t`: more than one chunk, and few enough elements per thread.
bool prefetch_fits(const std::vector<Operand>& ops, const te::Stage& s, const GpuSharedTile& t) {
  if (s.reduce_axes[0].extent / t.k_chunk < 2) return false;
  const std::vector<int64_t> steps = copy_steps(ops, s, t);
  return *std::max_element(steps.begin(), steps.end()) <= kMaxPrefetchRegisters;
}

// Index arithmetic that leaves out what is 1 or absent (null).
Expr times(const Expr& e, int64_t k) { return k == 1 ? e : e * te::int_imm(k); }
Expr sum(const Expr& a, const Expr& b) { return a ? (b ? a + b : a) : b; }
Expr or_zero(const Expr& e) { return e ? e : te::int_imm(0); }

std::vector<int64_t> divisors_up_to(int64_t n, int64_t limit) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= std::min(n, limit); ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// A tile the stage can take, with what choose_shared_tile weighs.
struct Choice {
  GpuSharedTile tile;
  double parallelism, shared_reuse;
  std::tuple<double, double, int64_t> merit;  // rate, then reuse, then threads
};

// Every tile of stage `s` that fits p's threads and shared memory, each with its longest chunk.
std::vector<Choice> shared_tile_choices(const te::Stage& s, const GpuScheduleParams& p) {
  const size_t rank = s.axes.size();
  if (s.reducer != te::Reducer::Sum || (s.tag != "conv" && s.tag != "matmul") || rank < 2 || s.reduce_axes.empty())
    return {};
  int64_t reduction = 1;
  for (const te::IterVar& r : s.reduce_axes) reduction *= r.extent;
  if (reduction < 32) return {};
  const auto ops = operands_of(s);
  if (!ops) return {};
  // Rows along the operand-block axis (conv's output channel) or the second-innermost; columns along the
  // innermost; for a conv also threads along the output rows (a 7 x 7 map has 7 columns).
  const size_t r = operand_block_axis(s).value_or(rank - 2), c = rank - 1;
  const bool rows_of_outputs = rank >= 3 && r != rank - 2;
  const size_t h = rank - 2;
  const int64_t inner_reduction = reduction / s.reduce_axes[0].extent;
  std::vector<Choice> choices;
  for (int64_t tm : {1, 2, 4, 8}) {
    if (s.shape[r] % tm) continue;
    for (int64_t tn : {1, 2, 4, 8}) {
      if (s.shape[c] % tn) continue;
      for (int64_t ny : divisors_up_to(s.shape[r] / tm, 64))
        for (int64_t nx : divisors_up_to(s.shape[c] / tn, 64))
          for (int64_t nh : rows_of_outputs ? divisors_up_to(s.shape[h], 32) : std::vector<int64_t>{1}) {
            const int64_t threads = ny * nx * nh;
            if (threads < 32 || threads > p.threads_per_block) continue;
            GpuSharedTile t;
            t.block.assign(rank, 1);
            t.thread_tile.assign(rank, 1);
            t.block[r] = tm * ny;
            t.thread_tile[r] = tm;
            t.block[c] = tn * nx;
            t.thread_tile[c] = tn;
            if (rows_of_outputs) t.block[h] = nh;
            // The longest chunk (a divisor of the reduction's first axis) whose boxes fit.
            t.k_chunk = 0;
            for (int64_t k : divisors_up_to(s.reduce_axes[0].extent, 64)) {
              GpuSharedTile trial = t;
              trial.k_chunk = k;
              if (shared_bytes(*ops, s, trial) > p.shared_bytes) break;
              t.k_chunk = k;
            }
            if (t.k_chunk == 0) continue;
            int64_t blocks = 1, outputs = 1;
            for (size_t a = 0; a < rank; ++a) {
              blocks *= s.shape[a] / t.block[a];
              outputs *= t.block[a];
            }
            double staged = 0;
            for (const Operand& o : *ops) staged += static_cast<double>(box_layout(o, s, t).elements);
            const double parallelism =
                static_cast<double>(std::min(blocks * threads, p.min_threads)) / static_cast<double>(p.min_threads) *
                static_cast<double>(std::min(blocks, p.multiprocessors)) / static_cast<double>(p.multiprocessors);
            // What a thread gets of the FMA rate, as a product of three shares: its warp's lanes that
            // work; the register tile's outputs per value it reads from shared memory (a 1 x 1 tile reads
            // two values per FMA and runs at a third, 8 x 8 at four fifths); and the operands' reuse in
            // shared memory (FMAs per element fetched from global memory, enough at 16).
            const double lanes = static_cast<double>(threads) / static_cast<double>((threads + 31) / 32 * 32);
            const double register_reuse = static_cast<double>(tm * tn) / static_cast<double>(tm + tn);
            const double shared_reuse = static_cast<double>(outputs * t.k_chunk * inner_reduction) / staged;
            const double rate = lanes * register_reuse / (register_reuse + 1) * std::min(1.0, shared_reuse / 16);
            choices.push_back({t, parallelism, shared_reuse, {rate, shared_reuse, threads}});
          }
    }
  }
  return choices;
}

}  // namespace

std::optional<GpuSharedTile> choose_shared_tile(const te::Stage& s, const GpuScheduleParams& p) {
  const std::vector<Choice> choices = shared_tile_choices(s, p);
  if (choices.empty()) return std::nullopt;
  double best = 0;
  for (const Choice& ch : choices) best = std::max(best, ch.parallelism);
  const Choice* pick = nullptr;
  for (const Choice& ch : choices)
    if (ch.parallelism >= 0.5 * best && (!pick || ch.merit > pick->merit)) pick = &ch;
  // Staging that saves little global traffic costs more in barriers than it saves: such a stage (a
  // layer too small to fill the GPU with blocks that share much) keeps the default schedule.
  if (pick->shared_reuse < kMinSharedReuse) return std::nullopt;
  GpuSharedTile t = pick->tile;
  t.prefetch = p.prefetch_chunks && prefetch_fits(*operands_of(s), s, t);
  return t;
}

std::optional<GpuSharedTile> random_shared_tile(const te::Stage& s, const GpuScheduleParams& p, uint64_t seed) {
  const std::vector<Choice> choices = shared_tile_choices(s, p);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(s.name));
  const size_t pick = std::uniform_int_distribution<size_t>(0, choices.size())(rng);
  if (pick == choices.size()) return std::nullopt;  // the thread-per-output schedule is a choice too
  GpuSharedTile t = choices[pick].tile;
  const std::vector<int64_t> chunks = divisors_up_to(s.reduce_axes[0].extent, t.k_chunk);
  t.k_chunk = chunks[std::uniform_int_distribution<size_t>(0, chunks.size() - 1)(rng)];
  t.prefetch = prefetch_fits(*operands_of(s), s, t) && std::uniform_int_distribution<int>(0, 1)(rng) == 1;
  return t;
}

std::vector<GpuSharedTile> shared_tile_space(const te::Stage& s, const GpuScheduleParams& p) {
  GpuScheduleParams wide = p;
  wide.shared_bytes = p.tuned_shared_bytes;
  std::vector<GpuSharedTile> space;
  const std::vector<Choice> choices = shared_tile_choices(s, wide);
  if (choices.empty()) return space;
  const std::vector<Operand> ops = *operands_of(s);
  for (const Choice& ch : choices)
    for (int64_t k : divisors_up_to(s.reduce_axes[0].extent, ch.tile.k_chunk)) {
      GpuSharedTile t = ch.tile;
      t.k_chunk = k;
      space.push_back(t);
      t.prefetch = true;
      if (prefetch_fits(ops, s, t)) space.push_back(t);
    }
  return space;
}

Stmt lower_stage_gpu_shared(const te::TensorRef& t, const GpuSharedTile& tile,
                            const std::map<const te::TensorNode*, BufferRef>& buffers, const Epilogue* epilogue) {
  const te::Stage& s = *t->stage;
  const auto ops = operands_of(s);
  if (!ops) throw InternalError("GPU shared tiles: stage '" + s.name + "' reads an operand through a non-affine index");
  const size_t rank = s.axes.size();
  const std::vector<Expr> rvars = reduce_vars(s);
  const int64_t threads = tile.threads(), k = tile.k_chunk;
  std::vector<int64_t> along(rank), blocks(rank);  // threads along each axis, blocks along each axis
  int64_t grid = 1, tile_size = 1;
  for (size_t a = 0; a < rank; ++a) {
    along[a] = tile.block[a] / tile.thread_tile[a];
    blocks[a] = s.shape[a] / tile.block[a];
    grid *= blocks[a];
    tile_size *= tile.thread_tile[a];
  }
  // The block's coordinates along each axis, from blockIdx (row-major over the blocks).
  const Expr b = te::var(s.name + ".b");
  const std::vector<Expr> block_at = row_major_digits(b, blocks);
  // Register-tile loops (unrolled) and the accumulator slot they select.
  std::vector<Expr> tile_var(rank);
  Expr slot;
  for (size_t a = 0; a < rank; ++a)
    if (tile.thread_tile[a] > 1) {
      tile_var[a] = te::var(s.name + ".i" + std::to_string(a));
      slot = slot ? times(slot, tile.thread_tile[a]) + tile_var[a] : tile_var[a];
    }
  slot = or_zero(slot);
  auto over_tile = [&](Stmt st) {
    for (size_t a = rank; a-- > 0;)
      if (tile_var[a]) st = for_loop(tile_var[a], tile.thread_tile[a], ForKind::Unrolled, st);
    return st;
  };
  // Within the block, thread `tv`'s element along each axis (its tile strided by the threads along it),
  // and that element's place in the whole output.
  auto local_of = [&](const Expr& tv) {
    const std::vector<Expr> thread_at = row_major_digits(tv, along);
    std::vector<Expr> u(rank);
    for (size_t a = 0; a < rank; ++a) {
      const int64_t g = group_of(tile, a);
      Expr i = tile_var[a];
      if (g == 1) {
        u[a] = or_zero(sum(i ? times(i, along[a]) : nullptr, along[a] > 1 ? thread_at[a] : nullptr));
        continue;
      }
      // Group i / g of the tile is a run of g elements per thread, the threads' runs side by side.
      u[a] = times(te::floordiv(i, te::int_imm(g)), along[a] * g) + times(thread_at[a], g) + te::floormod(i, te::int_imm(g));
    }
    return u;
  };
  auto output_at = [&](const std::vector<Expr>& u) {
    std::map<const te::ExprNode*, Expr> m;
    for (size_t a = 0; a < rank; ++a)
      m[s.axes[a].get()] = or_zero(sum(blocks[a] > 1 ? times(block_at[a], tile.block[a]) : nullptr,
                                       u[a]->op == te::ExprOp::IntImm && u[a]->int_value == 0 ? nullptr : u[a]));
    return m;
  };
  auto thread_loop = [&](const std::string& phase, const std::function<Stmt(const Expr&)>& body) {
    Expr tv = te::var(s.name + "." + phase);
    return for_loop(tv, threads, ForKind::GpuThread, body(tv));
  };

  const BufferRef acc = make_gpu_buffer(s.name + ".acc", s.dtype, tile_size, BufferScope::GpuPerThread, threads);
  std::map<const te::TensorNode*, BufferRef> all = buffers;
  struct Staged {
    BufferRef buffer;
    BoxLayout box;
  };
  std::vector<Staged> staged;
  for (size_t i = 0; i < ops->size(); ++i) {
    const Operand& o = (*ops)[i];
    Staged st{nullptr, box_layout(o, s, tile)};
    st.buffer = make_gpu_buffer(s.name + ".s" + std::to_string(i), o.load->tensor->dtype, st.box.elements,
                           BufferScope::GpuShared, threads);
    all[st.buffer->node.get()] = st.buffer;
    staged.push_back(std::move(st));
  }

  // acc = init
  Stmt init = thread_loop("init", [&](const Expr& tv) {
    return over_tile(store(acc, slot, te::substitute(flatten_loads(s.init, all), output_at(local_of(tv)))));
  });

  const Expr ko = te::var(s.name + ".ko"), v = te::var(s.name + ".k");
  const int64_t chunks = s.reduce_axes[0].extent / k;
  // Each thread copies every threads-th element of each operand's box: `steps` of them.
  const std::vector<int64_t> steps_of = copy_steps(*ops, s, tile);
  // Chunk prefetch: the next chunk's elements are loaded into registers before the current chunk's
  // FMAs and stored into shared memory after them, so the global loads' latency overlaps the FMAs
  // instead of stalling the copy (one register per element a thread copies; too many would spill).
  if (tile.prefetch && !prefetch_fits(*ops, s, tile))
    throw InternalError("GPU shared tiles: stage '" + s.name +
                        "': chunk prefetch with one chunk or too many elements per thread");
  std::vector<BufferRef> held(ops->size());
  if (tile.prefetch)
    for (size_t i = 0; i < ops->size(); ++i)
      held[i] = make_gpu_buffer(s.name + ".r" + std::to_string(i), (*ops)[i].load->tensor->dtype, steps_of[i],
                                BufferScope::GpuPerThread, threads);
  // The operands' boxes of `chunk` (an index of the first reduction axis's chunks): from global memory
  // into shared memory (Direct), into the thread's registers (Load), or from those into shared
  // memory (Store).
  enum class Copy { Direct, Load, Store };
  auto fetch_phase = [&](const std::string& phase, const Expr& chunk, Copy how) {
    return thread_loop(phase, [&](const Expr& tv) {
      std::vector<Stmt> copies;
      for (size_t i = 0; i < ops->size(); ++i) {
        const Operand& o = (*ops)[i];
        const Staged& st = staged[i];
        int64_t elements = 1;
        for (int64_t e : st.box.extents) elements *= e;
        const int64_t steps = steps_of[i];
        const Expr e = te::var(st.buffer->name + "." + phase), f = e * te::int_imm(threads) + tv;
        const std::vector<Expr> at = row_major_digits(f, st.box.extents);
        const Shape& dims = o.load->tensor->shape;
        std::vector<Expr> source;
        Expr into;
        for (size_t d = 0; d < st.box.extents.size(); ++d) {
          Expr origin = o.constant[d] ? te::int_imm(o.constant[d]) : nullptr;
          int64_t lo = o.constant[d], hi = o.constant[d];
          for (size_t a = 0; a < rank; ++a) {
            if (o.axis[d][a] && blocks[a] > 1) origin = sum(origin, times(block_at[a], o.axis[d][a] * tile.block[a]));
            hi += o.axis[d][a] * (s.shape[a] - 1);
          }
          for (size_t j = 0; j < rvars.size(); ++j) hi += o.reduce[d][j] * (s.reduce_axes[j].extent - 1);
          if (o.reduce[d][0] && s.reduce_axes[0].extent > k) origin = sum(origin, times(chunk, o.reduce[d][0] * k));
          Expr x = or_zero(sum(origin, st.box.extents[d] > 1 ? at[d] : nullptr));
          // Indices the stage itself reads lie inside; a box spans only those (tiles divide the axes), so
          // a clamp is needed only where the stage's own reads are guarded (a select around the load).
          if (lo < 0 || hi >= dims[d])
            x = te::binary(te::ExprOp::Max, te::binary(te::ExprOp::Min, x, te::int_imm(dims[d] - 1)), te::int_imm(0));
          source.push_back(x);
          into = sum(into, st.box.extents[d] > 1 ? times(at[d], st.box.pitches[d]) : nullptr);
        }
        const Expr global = flatten_loads(te::load(o.load->tensor, source), all);
        Stmt copy = how == Copy::Direct ? store(st.buffer, or_zero(into), global)
                    : how == Copy::Load ? store(held[i], e, global)
                                        : store(st.buffer, or_zero(into), load(held[i], e));
        if (elements % threads) copy = if_then_else(f < te::int_imm(elements), copy);
        copies.push_back(for_loop(e, steps, steps <= 16 ? ForKind::Unrolled : ForKind::Serial, copy));
      }
      return block(std::move(copies));
    });
  };

  // acc += the chunk's terms, the operands read from their boxes.
  Stmt compute = thread_loop("compute", [&](const Expr& tv) {
    const std::vector<Expr> u = local_of(tv);
    Expr body = te::rewrite_loads(s.body, [&](const Expr& l) -> Expr {
      for (size_t i = 0; i < ops->size(); ++i) {
        const Operand& o = (*ops)[i];
        if (!te::same_expr(o.load, l)) continue;
        Expr at;
        for (size_t d = 0; d < o.constant.size(); ++d) {
          Expr x;
          for (size_t a = 0; a < rank; ++a)
            if (o.axis[d][a] && !(u[a]->op == te::ExprOp::IntImm)) x = sum(x, times(u[a], o.axis[d][a]));
          for (size_t j = 0; j < rvars.size(); ++j)
            if (o.reduce[d][j]) x = sum(x, times(j == 0 ? v : rvars[j], o.reduce[d][j]));
          if (x) at = sum(at, times(x, staged[i].box.pitches[d]));
        }
        return load(staged[i].buffer, or_zero(at));
      }
      return nullptr;
    });
    std::map<const te::ExprNode*, Expr> m = output_at(u);
    m[rvars[0].get()] = s.reduce_axes[0].extent > k ? ko * te::int_imm(k) + v : v;
    body = te::substitute(flatten_loads(body, all), m);
    Stmt step = over_tile(store(acc, slot, combine_reduction(s.reducer, load(acc, slot), body)));
    for (size_t j = rvars.size(); j-- > 1;) step = for_loop(rvars[j], s.reduce_axes[j].extent, ForKind::Serial, step);
    const bool unroll = rvars.size() == 1 && k <= 16;
    return for_loop(v, k, unroll ? ForKind::Unrolled : ForKind::Serial, step);
  });

  // out = epilogue(acc)
  Stmt finish = thread_loop("store", [&](const Expr& tv) {
    const std::map<const te::ExprNode*, Expr> m = output_at(local_of(tv));
    const BufferRef& out = buffers.at(epilogue ? epilogue->out.get() : t.get());
    Expr a = load(acc, slot);
    Expr result = epilogue ? te::substitute(flatten_loads(epilogue->expr, all), {{epilogue->value.get(), a}}) : a;
    return over_tile(store(out, te::substitute(flat_index(s.axes, s.shape), m), te::substitute(result, m)));
  });

  Stmt body;
  if (!tile.prefetch) {
    Stmt loop =
        for_loop(ko, chunks, ForKind::Serial, block({fetch_phase("fetch", ko, Copy::Direct), barrier(), compute, barrier()}));
    body = block({init, loop});
  } else {
    // Chunk 0 is copied before the loop; in iteration ko, chunk ko + 1 is loaded before chunk ko's FMAs
    // and stored after the barrier that ends them (the last iteration has no next chunk).
    const Expr more = ko < te::int_imm(chunks - 1), next = ko + te::int_imm(1);
    Stmt loop = for_loop(ko, chunks, ForKind::Serial,
                         block({if_then_else(more, fetch_phase("load", next, Copy::Load)), compute, barrier(),
                                if_then_else(more, fetch_phase("store", next, Copy::Store)), barrier()}));
    body = block({init, fetch_phase("fetch", te::int_imm(0), Copy::Direct), barrier(), loop});
  }
  Stmt kernel = allocate(acc, block({body, finish}));
  for (size_t i = held.size(); i-- > 0;)
    if (held[i]) kernel = allocate(held[i], kernel);
  for (size_t i = staged.size(); i-- > 0;) kernel = allocate(staged[i].buffer, kernel);
  return for_loop(b, grid, ForKind::GpuBlock, kernel);
}

}  // namespace kiln::lower
