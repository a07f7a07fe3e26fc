#include "scheduler/search/features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>

#include "scheduler/lower/lower_state.h"
#include "scheduler/search/access_region.h"

namespace kiln::search {
namespace {

using lower::ForKind;
using lower::Stmt;
using lower::StmtKind;
using lower::StmtNode;
using te::Expr;
using te::ExprNode;
using te::ExprOp;
using te::TensorNode;

constexpr int kTopBuffers = 5;
constexpr int kCurvePoints = 10;

// ---------------------------------------------------------------------------------------------------
// The row layout. Ansor's order; the names are kiln's. Writing a row and naming it walk the same
// list, so the two cannot drift apart.

// Where the innermost loop of one annotation kind sits relative to the stored tensor (Ansor's one-hot).
enum class LoopPosition { None, InnerSpatial, MiddleSpatial, OuterSpatial, InnerReduce, MiddleReduce, OuterReduce, Mixed };
constexpr int kLoopPositions = 8;
const char* const kLoopPositionNames[kLoopPositions] = {"none", "inner_spatial", "middle_spatial", "outer_spatial",
                                                        "inner_reduce", "middle_reduce", "outer_reduce", "mixed"};

enum class AccessKind { Read, Write, ReadWrite };
const char* const kAccessNames[3] = {"read", "write", "read_write"};

// LoopRead: an enclosing loop does not move the access, so the same elements are read again on each
// of its iterations. Serial: an earlier statement in the same loop touched the buffer too.
enum class ReuseKind { LoopRead, Serial, None };
const char* const kReuseNames[3] = {"reuse_loop_read", "reuse_serial", "reuse_none"};

// Op-count slots, in row order (float group then int group, then bool and select).
enum OpSlot {
  kFloatMad, kFloatAddSub, kFloatMul, kFloatDivMod, kFloatCmp, kFloatMath, kFloatOther,
  kIntMad, kIntAddSub, kIntMul, kIntDivMod, kIntCmp, kIntMath, kIntOther,
  kBoolOp, kSelectOp, kNumOpSlots
};
const char* const kOpNames[kNumOpSlots] = {
    "float_mad", "float_addsub", "float_mul", "float_divmod", "float_cmp", "float_math_func", "float_other_func",
    "int_mad",   "int_addsub",   "int_mul",   "int_divmod",   "int_cmp",   "int_math_func",   "int_other_func",
    "bool_op",   "select_op"};
// Integer slots sit this far after their float twins.
constexpr int kIntOffset = kIntMad - kFloatMad;

const char* const kAnnotationPrefixes[3] = {"vec", "unroll", "parallel"};
const ForKind kAnnotationKinds[3] = {ForKind::Vectorized, ForKind::Unrolled, ForKind::Parallel};
const char* const kGpuNames[8] = {"is_gpu",       "block_x_len",  "block_y_len",  "block_z_len",
                                  "thread_x_len", "thread_y_len", "thread_z_len", "vthread_len"};
const char* const kBufferValueNames[11] = {"bytes",
                                           "unique_bytes",
                                           "lines",
                                           "unique_lines",
                                           "reuse_dis_iter",
                                           "reuse_dis_bytes",
                                           "reuse_ct",
                                           "bytes_d_reuse_ct",
                                           "unique_bytes_d_reuse_ct",
                                           "lines_d_reuse_ct",
                                           "unique_lines_d_reuse_ct"};
const char* const kTailNames[7] = {"alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod",
                                   "outer_prod", "num_loops",  "auto_unroll_max_step"};

std::vector<std::string> make_names() {
  std::vector<std::string> n;
  for (const char* op : kOpNames) n.emplace_back(op);
  for (const char* p : kAnnotationPrefixes) {
    n.push_back(std::string(p) + "_num");
    n.push_back(std::string(p) + "_prod");
    n.push_back(std::string(p) + "_len");
    for (const char* pos : kLoopPositionNames) n.push_back(std::string(p) + "_pos." + pos);
  }
  for (const char* g : kGpuNames) n.emplace_back(g);
  for (int b = 0; b < kTopBuffers; ++b) {
    const std::string prefix = "B" + std::to_string(b) + ".";
    for (const char* a : kAccessNames) n.push_back(prefix + a);
    for (int k = 0; k < 4; ++k) n.push_back(prefix + kBufferValueNames[k]);
    for (const char* r : kReuseNames) n.push_back(prefix + r);
    for (int k = 4; k < 11; ++k) n.push_back(prefix + kBufferValueNames[k]);
    n.push_back(prefix + "stride");
  }
  for (int k = 0; k < kCurvePoints; ++k) n.push_back("intensity." + std::to_string(k));
  for (const char* t : kTailNames) n.emplace_back(t);
  return n;
}

// Ansor's shifted log: 0 stays 0, the sign is kept.
float slog(double x) { return static_cast<float>(x < 0 ? -std::log2(1.0 - x) : std::log2(1.0 + x)); }

// Appends log-scaled values to a row.
struct RowWriter {
  std::vector<float> row;
  void put(double x) { row.push_back(slog(x)); }
  void one_hot(int hot, int n) {
    for (int k = 0; k < n; ++k) put(k == hot ? 1.0 : 0.0);
  }
};

// ---------------------------------------------------------------------------------------------------
// Operation counts of a stored value. A multiply feeding an add or a subtract is one multiply-add
// (what an FMA unit executes), counted instead of the two; the arithmetic-intensity FLOPs count it twice.

void count_ops(const Expr& e, std::array<double, kNumOpSlots>& c) {
  if (!e) return;
  const bool fl = !e->args.empty() && is_float(e->args[0]->dtype);
  const int off = fl ? 0 : kIntOffset;
  switch (e->op) {
    case ExprOp::IntImm:
    case ExprOp::FloatImm:
    case ExprOp::Var: return;
    case ExprOp::Load: break;  // the index arithmetic below is counted
    case ExprOp::Cast: c[is_float(e->dtype) ? kFloatOther : kIntOther] += 1; break;
    case ExprOp::Reinterpret: c[kIntOther] += 1; break;
    case ExprOp::Select: c[kSelectOp] += 1; break;
    case ExprOp::Neg: c[kFloatAddSub + off] += 1; break;
    case ExprOp::Not:
    case ExprOp::And:
    case ExprOp::Or: c[kBoolOp] += 1; break;
    case ExprOp::Xor: c[e->args[0]->dtype == DType::Bool ? kBoolOp : kIntMath] += 1; break;
    case ExprOp::BitNot:
    case ExprOp::BitAnd:
    case ExprOp::BitOr:
    case ExprOp::BitXor:
    case ExprOp::Shl:
    case ExprOp::Shr: c[kIntMath] += 1; break;
    case ExprOp::Dot4U8S8:
    case ExprOp::Dot4S8S8: c[kIntMad] += 4; break;  // four multiply-adds
    case ExprOp::Add:
    case ExprOp::Sub: {
      for (int side = 0; side < 2; ++side) {
        const Expr& m = e->args[static_cast<size_t>(side)];
        if (m->op != ExprOp::Mul) continue;
        c[kFloatMad + off] += 1;
        count_ops(m->args[0], c);
        count_ops(m->args[1], c);
        count_ops(e->args[static_cast<size_t>(1 - side)], c);
        return;
      }
      c[kFloatAddSub + off] += 1;
      break;
    }
    case ExprOp::Mul: c[kFloatMul + off] += 1; break;
    case ExprOp::Div:
    case ExprOp::Mod:
    case ExprOp::FloorDiv:
    case ExprOp::FloorMod:
    case ExprOp::FMod: c[kFloatDivMod + off] += 1; break;
    case ExprOp::Min:
    case ExprOp::Max:
    case ExprOp::Eq:
    case ExprOp::Ne:
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge: c[kFloatCmp + off] += 1; break;
    default: c[kFloatMath + off] += 1; break;  // exp, log, sqrt, tanh, abs, floor, pow, isnan, ...
  }
  for (const Expr& a : e->args) count_ops(a, c);
}

double float_flops(const std::array<double, kNumOpSlots>& c) {
  return 2 * c[kFloatMad] + c[kFloatAddSub] + c[kFloatMul] + c[kFloatDivMod] + c[kFloatCmp] + c[kFloatMath] +
         c[kFloatOther];
}

// ---------------------------------------------------------------------------------------------------
// The walk: one row per Store, in program order.

// What a loop around the current statement keeps besides its variable and extent (in LoopNest).
struct LoopFrame {
  ForKind kind;
  // One entry per (store, buffer) inside this loop so far: what reuse distances are measured in.
  struct Touch {
    const TensorNode* buffer;
    double elements;
    double elem_bytes;
  };
  std::vector<Touch> touches;
};

struct BufferUse {
  const TensorNode* buffer;
  AccessKind kind;
  std::vector<Access> accesses;
  double elem_bytes;
  int64_t size;
};

struct BufferValues {
  AccessKind kind;
  double bytes, unique_bytes, lines, unique_lines;
  ReuseKind reuse;
  double reuse_dis_iter, reuse_dis_bytes, reuse_ct, stride;
};

struct AllocFrame {
  const TensorNode* buffer;
  size_t loops_outside;
  double outer_prod;
  double bytes;
};

using UnrollSteps = std::map<std::string, int64_t>;

class StoreFeatureWalker {
 public:
  StoreFeatureWalker(int cache_line_bytes, const UnrollSteps* unroll) : line_(cache_line_bytes), unroll_(unroll) {}

  ProgramFeatures run(const Stmt& body) {
    visit(body);
    return std::move(rows_);
  }

 private:
  void visit(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::For: {
        if (s->extent == 1) {  // a loop of one iteration is its variable at 0 (Ansor's IR is simplified so)
          nest_.unit_vars.push_back(s->var.get());
          visit(s->body[0]);
          nest_.unit_vars.pop_back();
          return;
        }
        nest_.loops.push_back({s->var.get(), s->extent});
        loops_.push_back({s->for_kind, {}});
        outer_prod_ *= static_cast<double>(s->extent);
        visit(s->body[0]);
        outer_prod_ /= static_cast<double>(s->extent);
        loops_.pop_back();
        nest_.loops.pop_back();
        return;
      }
      case StmtKind::Allocate: {
        const double bytes = static_cast<double>(s->buffer->size) * static_cast<double>(dtype_size(s->buffer->dtype));
        allocs_.push_back({s->buffer->node.get(), loops_.size(), outer_prod_, bytes});
        visit(s->body[0]);
        allocs_.pop_back();
        return;
      }
      case StmtKind::Store: on_store(*s); return;
      case StmtKind::IfThenElse:  // both branches, as if both ran: conditions are not modelled
      case StmtKind::Block:
        for (const Stmt& b : s->body) visit(b);
        return;
      case StmtKind::ExternCall: return;  // a runtime kernel: no loop nest to describe
      case StmtKind::Prefetch: return;    // a hint: no value read or written
      case StmtKind::Barrier: return;     // its cost follows from the thread loops around the stores
    }
  }

  // The buffers the store touches: the stored one first, then loads in order of appearance. A buffer
  // both read and written is an update of the same element: its read indices add nothing.
  std::vector<BufferUse> buffer_uses(const StmtNode& s) {
    std::vector<BufferUse> uses;
    const lower::Buffer& out = *s.buffer;
    uses.push_back({out.node.get(), AccessKind::Write, {make_access(s.index)}, static_cast<double>(dtype_size(out.dtype)),
                    out.size});
    collect_loads(s.value, uses);
    return uses;
  }

  void collect_loads(const Expr& e, std::vector<BufferUse>& uses) {
    if (e->op == ExprOp::Load) {
      const TensorNode* t = e->tensor.get();
      auto it = std::find_if(uses.begin(), uses.end(), [&](const BufferUse& u) { return u.buffer == t; });
      if (it == uses.end()) {
        const int64_t size = t->shape.empty() ? 1 : t->shape[0];
        uses.push_back({t, AccessKind::Read, {make_access(e->args.at(0))}, static_cast<double>(dtype_size(t->dtype)), size});
      } else if (it->kind == AccessKind::Write) {
        it->kind = AccessKind::ReadWrite;
      } else if (it->kind == AccessKind::Read) {
        it->accesses.push_back(make_access(e->args.at(0)));
      }
    }
    for (const Expr& a : e->args) collect_loads(a, uses);
  }

  // All accesses of a buffer together, with the loops from `level` inward running.
  Region union_region(const BufferUse& u, size_t level) const {
    Region r = region_of(u.accesses[0], nest_, level, u.size);
    double total = r.count;
    for (size_t k = 1; k < u.accesses.size(); ++k) {
      Region o = region_of(u.accesses[k], nest_, level, u.size);
      total += o.count;
      r.lo = std::min(r.lo, o.lo);
      r.hi = std::max(r.hi, o.hi);
    }
    if (u.accesses.size() > 1) r.count = std::min(total, static_cast<double>(r.hi - r.lo + 1));
    r.count = std::min(r.count, static_cast<double>(u.size));
    return r;
  }

  bool mentions(const BufferUse& u, const ExprNode* v) const {
    return std::any_of(u.accesses.begin(), u.accesses.end(), [&](const Access& a) { return a.mentions(v); });
  }

  // Ansor's reuse analysis, from the innermost loop out: the first loop that does not move the access
  // reads the same data again (reuse count = its extent); a loop holding earlier statements on the
  // same buffer reuses it serially.
  void reuse_of(const BufferUse& u, BufferValues& bv) const {
    double dis_iter = 1, dis_bytes = -1;
    for (size_t i = loops_.size(); i-- > 0;) {
      const LoopFrame& f = loops_[i];
      const double extent = static_cast<double>(nest_.loops[i].extent);
      if (mentions(u, nest_.loops[i].var)) {
        dis_iter *= extent;
        dis_bytes = 0;
        for (const LoopFrame::Touch& t : f.touches) dis_bytes += t.elements * t.elem_bytes;
      } else {
        if (dis_bytes < 0) {
          dis_bytes = 0;
          for (const LoopFrame::Touch& t : f.touches) dis_bytes += t.elem_bytes;
        }
        bv.reuse = ReuseKind::LoopRead;
        bv.reuse_dis_iter = dis_iter;
        bv.reuse_dis_bytes = dis_bytes;
        bv.reuse_ct = extent;
        return;
      }
      int same = 0;
      double min_elements = std::numeric_limits<double>::max(), all_bytes = 0;
      for (const LoopFrame::Touch& t : f.touches) {
        all_bytes += t.elements * t.elem_bytes;
        if (t.buffer != u.buffer) continue;
        ++same;
        min_elements = std::min(min_elements, t.elements);
      }
      if (same > 1) {
        bv.reuse = ReuseKind::Serial;
        bv.reuse_dis_iter = min_elements / extent;
        bv.reuse_dis_bytes = all_bytes / extent;
        bv.reuse_ct = same - 1;
        return;
      }
    }
    bv.reuse = ReuseKind::None;
    bv.reuse_dis_iter = bv.reuse_dis_bytes = bv.reuse_ct = 0;
  }

  // Position of loop `i` for the store: spatial loops move the stored element (ranked by how far they
  // move it), reduce loops move only what is read (ranked by nesting), a fused loop that moves it
  // through divisions is mixed, and loops outside the stored buffer's allocation belong to the stage
  // it is computed in (outer spatial, as Ansor assumes).
  LoopPosition position_of(size_t i, const Access& store, const std::vector<const ExprNode*>& value_vars,
                           size_t scope_begin) const {
    if (i < scope_begin) return LoopPosition::OuterSpatial;
    const ExprNode* v = nest_.loops[i].var;
    for (const LinearIndex::Atom& a : store.index.atoms)
      if (std::find(a.vars.begin(), a.vars.end(), v) != a.vars.end()) return LoopPosition::Mixed;
    auto coef_of = [&](const ExprNode* x) -> int64_t {
      for (const LinearIndex::Term& t : store.index.terms)
        if (t.var == x) return std::abs(t.coef);
      return 0;
    };
    auto reads = [&](const ExprNode* x) { return std::find(value_vars.begin(), value_vars.end(), x) != value_vars.end(); };
    if (const int64_t c = coef_of(v); c != 0) {
      int64_t lo = c, hi = c;
      for (size_t k = scope_begin; k < loops_.size(); ++k)
        if (const int64_t ck = coef_of(nest_.loops[k].var); ck != 0) {
          lo = std::min(lo, ck);
          hi = std::max(hi, ck);
        }
      return c == lo ? LoopPosition::InnerSpatial : c == hi ? LoopPosition::OuterSpatial : LoopPosition::MiddleSpatial;
    }
    if (!reads(v)) return LoopPosition::OuterSpatial;
    size_t first = loops_.size(), last = 0;
    for (size_t k = scope_begin; k < loops_.size(); ++k)
      if (coef_of(nest_.loops[k].var) == 0 && reads(nest_.loops[k].var)) {
        first = std::min(first, k);
        last = k;
      }
    return i == last ? LoopPosition::InnerReduce : i == first ? LoopPosition::OuterReduce : LoopPosition::MiddleReduce;
  }

  void on_store(const StmtNode& s) {
    RowWriter w;
    w.row.reserve(kFeaturesPerStore);
    const size_t depth = loops_.size();

    // Group 1: computation, per execution times the loops around the store.
    std::array<double, kNumOpSlots> ops{};
    count_ops(s.value, ops);
    for (double c : ops) w.put(c * outer_prod_);

    const TensorNode* out = s.buffer->node.get();
    const AllocFrame* alloc = nullptr;
    for (size_t k = allocs_.size(); k-- > 0;)
      if (allocs_[k].buffer == out) {
        alloc = &allocs_[k];
        break;
      }
    std::vector<BufferUse> uses = buffer_uses(s);
    std::vector<const ExprNode*> value_vars;
    collect_vars(s.value, value_vars);
    for (int a = 0; a < 3; ++a) {
      double num = 0, prod = 1, len = 0;
      LoopPosition pos = LoopPosition::None;
      for (size_t i = 0; i < depth; ++i) {
        if (loops_[i].kind != kAnnotationKinds[a]) continue;
        ++num;
        prod *= static_cast<double>(nest_.loops[i].extent);
        len = static_cast<double>(nest_.loops[i].extent);
        pos = position_of(i, uses[0].accesses[0], value_vars, alloc ? alloc->loops_outside : 0);
      }
      w.put(num);
      w.put(num > 0 ? prod : 0);
      w.put(len);
      w.one_hot(static_cast<int>(pos), kLoopPositions);
    }
    // GPU values: a kernel's grid (GpuBlock loops) and block (the innermost GpuThread loop: a block's
    // phases are thread loops of one extent, lower_gpu.h); y, z and vthreads stay 0, kiln binds x only.
    double grid = 0, block_threads = 0;
    for (size_t i = 0; i < depth; ++i) {
      if (loops_[i].kind == ForKind::GpuBlock) grid = (grid > 0 ? grid : 1) * static_cast<double>(nest_.loops[i].extent);
      if (loops_[i].kind == ForKind::GpuThread) block_threads = static_cast<double>(nest_.loops[i].extent);
    }
    w.put(grid > 0 || block_threads > 0 ? 1 : 0);
    w.put(grid);
    w.put(0);
    w.put(0);
    w.put(block_threads);
    for (int g = 0; g < 3; ++g) w.put(0);

    // Regions per loop level, innermost first: they feed reuse distances (of this and later stores)
    // and the arithmetic-intensity curve.
    std::vector<double> flops_at, bytes_at;
    std::vector<Region> outermost(uses.size());
    double flops = float_flops(ops);
    const double store_flops = flops;
    for (size_t i = depth; i-- > 0;) {
      double bytes = 0;
      for (size_t u = 0; u < uses.size(); ++u) {
        const Region r = union_region(uses[u], i);
        loops_[i].touches.push_back({uses[u].buffer, r.count, uses[u].elem_bytes});
        bytes += r.count * uses[u].elem_bytes;
        if (i == 0) outermost[u] = r;
      }
      flops *= static_cast<double>(nest_.loops[i].extent);
      flops_at.push_back(flops);
      bytes_at.push_back(bytes);
    }

    // Group 2: the buffers, most cache lines first (then most bytes, then first touched).
    std::vector<BufferValues> values;
    for (size_t u = 0; u < uses.size(); ++u) values.push_back(buffer_values(uses[u], outermost[u]));
    std::vector<size_t> order(uses.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return values[a].lines != values[b].lines ? values[a].lines > values[b].lines : values[a].bytes > values[b].bytes;
    });
    for (int b = 0; b < kTopBuffers; ++b) {
      if (static_cast<size_t>(b) >= order.size()) {
        for (int k = 0; k < 18; ++k) w.put(0);
        continue;
      }
      const BufferValues& v = values[order[static_cast<size_t>(b)]];
      w.one_hot(static_cast<int>(v.kind), 3);
      w.put(v.bytes);
      w.put(v.unique_bytes);
      w.put(v.lines);
      w.put(v.unique_lines);
      w.one_hot(static_cast<int>(v.reuse), 3);
      w.put(v.reuse_dis_iter);
      w.put(v.reuse_dis_bytes);
      w.put(v.reuse_ct);
      // Without reuse, Ansor doubles instead of dividing: "no reuse" ranks worse than any reuse.
      const double divisor = v.reuse_ct > 0.5 ? v.reuse_ct : 0.5;
      w.put(v.bytes / divisor);
      w.put(v.unique_bytes / divisor);
      w.put(v.lines / divisor);
      w.put(v.unique_lines / divisor);
      w.put(v.stride);
    }

    // Group 3: FLOPs per byte as the loops around the store widen, sampled at 10 equal FLOP steps.
    if (store_flops <= 0 || flops_at.empty()) {
      for (int k = 0; k < kCurvePoints; ++k) w.put(0);
    } else {
      size_t pt = 0;
      for (int k = 0; k < kCurvePoints; ++k) {
        const double x = flops_at.back() * (k + 1) / kCurvePoints;
        while (pt + 1 < flops_at.size() && flops_at[pt] < x - 1e-4) ++pt;
        const double here = flops_at[pt] / bytes_at[pt];
        if (pt == 0) {
          w.put(here);
        } else {
          const double before = flops_at[pt - 1] / bytes_at[pt - 1];
          w.put(before + (here - before) / (flops_at[pt] - flops_at[pt - 1]) * (x - flops_at[pt - 1]));
        }
      }
    }

    // Group 4: the allocation of the stored buffer, when it is a local one.
    if (alloc) {
      w.put(alloc->bytes);
      w.put(alloc->bytes / uses[0].elem_bytes * alloc->outer_prod);
      w.put(alloc->outer_prod);
      w.put(outer_prod_ / alloc->outer_prod);
    } else {
      for (int k = 0; k < 4; ++k) w.put(0);
    }

    // Group 5: the loops around the store.
    w.put(outer_prod_);
    w.put(static_cast<double>(depth));
    int64_t unroll = 0;
    if (unroll_) {
      auto it = unroll_->find(s.buffer->name);
      if (it != unroll_->end()) unroll = it->second;
    }
    w.put(static_cast<double>(unroll));
    rows_.push_back(std::move(w.row));
  }

  BufferValues buffer_values(const BufferUse& u, const Region& outermost) const {
    BufferValues v{};
    v.kind = u.kind;
    v.bytes = outer_prod_ * u.elem_bytes;
    if (loops_.empty()) {
      v.unique_bytes = u.elem_bytes;
      v.lines = v.unique_lines = 1;
    } else {
      v.unique_bytes = outermost.count * u.elem_bytes;
      // The innermost loop that moves the access decides how many lines it crosses; loops inside it
      // re-touch the same element. On a GPU the threads of a warp access together, so a thread loop
      // that moves the access decides instead (coalescing: consecutive threads, consecutive elements).
      auto step_at = [&](size_t k) {
        double st = 0;
        for (const Access& a : u.accesses) {
          const double x = step_of(a, nest_.loops[k].var, nest_.loops[k].extent, nest_);
          if (x != 0) st = st == 0 ? x : std::min(st, x);
        }
        return st;
      };
      const size_t thread_loop = innermost_thread_loop();
      const double thread_stride = thread_loop < loops_.size() ? step_at(thread_loop) : 0;
      if (thread_stride != 0) {
        v.lines = std::max(1.0, outer_prod_ * std::min(1.0, thread_stride * u.elem_bytes / line_));
        v.stride = thread_stride;
      } else {
        double stride = 0, reduce_ratio = 1;
        size_t i = loops_.size();
        while (i-- > 0) {
          stride = step_at(i);
          if (stride != 0) break;
          reduce_ratio *= static_cast<double>(nest_.loops[i].extent);
        }
        v.lines = std::max(1.0, outer_prod_ / reduce_ratio * std::min(1.0, stride * u.elem_bytes / line_));
        v.stride = i + 1 == loops_.size() ? stride : 0;
      }
      const double run_bytes = std::min(outermost.contiguous * u.elem_bytes, static_cast<double>(line_));
      v.unique_lines = std::max(1.0, v.unique_bytes / run_bytes);
    }
    reuse_of(u, v);
    return v;
  }

  // The innermost GpuThread loop around the current statement, or loops_.size() when there is none.
  size_t innermost_thread_loop() const {
    for (size_t k = loops_.size(); k-- > 0;)
      if (loops_[k].kind == ForKind::GpuThread) return k;
    return loops_.size();
  }

  const double line_;
  const UnrollSteps* unroll_;
  LoopNest nest_;                  // the loops around the current statement
  std::vector<LoopFrame> loops_;  // and what each keeps, in the same order
  std::vector<AllocFrame> allocs_;
  double outer_prod_ = 1;
  ProgramFeatures rows_;
};

// The auto-unroll pragma's value around each stage's stores, by the name of the buffer they store
// to. Lowering turns the pragma into unrolled loops and forgets the value; Ansor's feature wants it.
// A stage computed inside another's loop inherits the pragma of the loop it sits under.
UnrollSteps unroll_steps_of(const state::State& s) {
  const auto& stages = s.stages();
  // The innermost pragma among iterators [0, end) of a stage.
  auto innermost_pragma = [&](const state::Stage& st, size_t end) {
    int64_t v = 0;
    for (size_t k = 0; k < end && k < st.iters.size(); ++k)
      if (st.iters[k].auto_unroll_max_step > 0) v = st.iters[k].auto_unroll_max_step;
    return v;
  };
  // The pragma of the loops a stage is computed under (0 at root); attachments chain, so walk up.
  auto inherited = [&](size_t id) {
    for (int guard = 0; guard < static_cast<int>(stages.size()); ++guard) {
      const state::Stage& st = stages[id];
      if (st.compute_at != state::ComputeAtKind::Iter || st.attach_stage < 0) return int64_t{0};
      const state::Stage& target = stages[static_cast<size_t>(st.attach_stage)];
      const int at = target.iter_of_node(st.attach_node);
      if (const int64_t v = innermost_pragma(target, static_cast<size_t>(at + 1)); v > 0) return v;
      id = static_cast<size_t>(st.attach_stage);
    }
    return int64_t{0};
  };
  UnrollSteps out;
  for (size_t id = 0; id < stages.size(); ++id) {
    const state::Stage& st = stages[id];
    if (st.kind != state::StageKind::Compute) continue;
    int64_t v = innermost_pragma(st, st.iters.size());
    if (v <= 0) v = inherited(id);
    if (v <= 0) continue;
    out[st.name()] = v;
    out[st.name() + ".local"] = v;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = make_names();
  return names;
}

ProgramFeatures extract_features(const lower::LoweredFunc& f, int cache_line_bytes) {
  return StoreFeatureWalker(cache_line_bytes, nullptr).run(f.body);
}

ProgramFeatures state_features(const state::State& s, int cache_line_bytes) {
  const lower::LoweredFunc f = lower::lower_state_func(s, "features", false);
  const UnrollSteps unroll = unroll_steps_of(s);
  return StoreFeatureWalker(cache_line_bytes, &unroll).run(f.body);
}

}  // namespace kiln::search
