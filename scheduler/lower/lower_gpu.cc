#include "scheduler/lower/lower_gpu.h"

#include "frontend/ir/error.h"
#include "scheduler/lower/gpu_cross_thread.h"
#include "scheduler/lower/gpu_shared_tiles.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {

BufferRef make_gpu_buffer(const std::string& name, DType dtype, int64_t size, BufferScope scope, int64_t threads) {
  auto b = std::make_shared<Buffer>(*make_buffer(name, dtype, size, true));
  b->scope = scope;
  b->threads = scope == BufferScope::GpuPerThread ? threads : 0;
  return b;
}

Stmt over_gpu_threads(const Expr& var, int64_t n, const Stmt& body, const GpuScheduleParams& p) {
  const int64_t threads = n >= p.threads_per_block ? p.threads_per_block : std::max<int64_t>(32, (n + 31) / 32 * 32);
  const int64_t blocks = (n + threads - 1) / threads;
  Expr bx = te::var(var->name + ".block"), tx = te::var(var->name + ".thread");
  Expr flat = bx * threads + tx;
  Stmt inner = substitute_stmt(body, {{var.get(), flat}});
  if (blocks * threads != n) inner = if_then_else(flat < te::int_imm(n), inner);
  return for_loop(bx, blocks, ForKind::GpuBlock, for_loop(tx, threads, ForKind::GpuThread, inner));
}

namespace {

// A register tile of a reduction: each thread computes rows x cols outputs of two axes, so a value it
// loads serves several multiply-adds (a weight every pixel of the tile, a pixel every channel) instead
// of one; the accumulators stay in registers (fully unrolled loops over a local buffer).
struct GpuTile {
  size_t row_axis = 0, col_axis = 0;
  int64_t rows = 1, cols = 1;
  bool tiled() const { return rows * cols > 1; }
};

// Rows along the operand-block axis (a conv's output channel, lower_dag.h) or else the second-innermost
// axis, columns along the innermost; the largest tile of up to 4 x 4 that divides both axes and still
// leaves p.min_threads threads (a bigger tile on a small layer would idle most of the GPU: with fixed
// 4 x 4 tiles ResNet-50 at batch 1 took 7.9 ms against 3.3 untiled, bench/RESULTS.md). None (1 x 1) for elementwise stages and
// short reductions, where a thread's loads are not shared anyway.
GpuTile choose_tile(const te::Stage& s, const GpuScheduleParams& p) {
  GpuTile t;
  const size_t rank = s.axes.size();
  int64_t reduction = 1;
  for (const auto& r : s.reduce_axes) reduction *= r.extent;
  if (s.reducer == te::Reducer::None || rank < 2 || reduction < 8) return t;
  t.col_axis = rank - 1;
  t.row_axis = operand_block_axis(s).value_or(rank - 2);
  const int64_t outputs = num_elements(s.shape);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{4, 4}, {2, 4}, {4, 2}, {2, 2}, {1, 4}, {1, 2}, {2, 1}}) {
    if (s.shape[t.row_axis] % rows != 0 || s.shape[t.col_axis] % cols != 0) continue;
    if (outputs / (rows * cols) < p.min_threads) continue;
    t.rows = rows;
    t.cols = cols;
    return t;
  }
  return t;
}

}  // namespace

Stmt lower_stage_gpu(const te::TensorRef& t, const std::map<const te::TensorNode*, BufferRef>& buffers,
                     const GpuScheduleParams& p, const Epilogue* epilogue, const std::optional<GpuSharedTile>* tuned) {
  const te::Stage& s = *t->stage;
  if (s.is_extern()) throw Unsupported("stage '" + s.name + "': op " + s.tag + " has no GPU kernel yet");
  const int64_t total = num_elements(s.shape);
  if (total == 0) return block({});
  const std::optional<GpuSharedTile> shared = tuned            ? *tuned
                                              : p.random_tiles ? random_shared_tile(s, p, *p.random_tiles)
                                              : p.shared_tiles ? choose_shared_tile(s, p)
                                                               : std::nullopt;
  if (shared) return lower_stage_gpu_shared(t, *shared, buffers, epilogue);
  if (tuned) {  // a tuned "none": the schedule without shared memory
    GpuScheduleParams unstaged = p;
    unstaged.shared_tiles = false;
    unstaged.random_tiles.reset();
    return lower_stage_gpu(t, buffers, unstaged, epilogue);
  }
  if (p.cross_thread_reductions)
    if (const int64_t lanes = cross_thread_lanes(s, p)) return lower_stage_gpu_cross_thread(t, lanes, buffers, p, epilogue);
  const BufferRef& out = buffers.at(epilogue ? epilogue->out.get() : t.get());
  const GpuTile tile = choose_tile(s, p);
  // The tile a thread computes: its flat index f over the tiles, each axis's tile recovered from it,
  // and the tile's rows and columns (unrolled loops r, c).
  Shape tiles = s.shape;
  if (tile.tiled()) {
    tiles[tile.row_axis] /= tile.rows;
    tiles[tile.col_axis] /= tile.cols;
  }
  Expr f = te::var(s.name + ".i"), r = te::var(s.name + ".r"), c = te::var(s.name + ".c");
  std::map<const te::ExprNode*, Expr> axis_of;
  const int64_t threads = num_elements(tiles);
  int64_t stride = threads;
  for (size_t k = 0; k < s.axes.size(); ++k) {
    stride /= tiles[k];
    Expr a = stride == 1 ? f : te::floordiv(f, te::int_imm(stride));
    if (k > 0) a = te::floormod(a, te::int_imm(tiles[k]));
    if (tile.tiled() && k == tile.row_axis) a = a * tile.rows + r;
    if (tile.tiled() && k == tile.col_axis) a = a * tile.cols + c;
    axis_of[s.axes[k].get()] = a;
  }
  auto over_tile = [&](const Stmt& st) {
    if (!tile.tiled()) return st;
    return for_loop(r, tile.rows, ForKind::Unrolled, for_loop(c, tile.cols, ForKind::Unrolled, st));
  };
  Expr body = flatten_loads(s.body, buffers);
  Stmt element;
  if (s.reducer == te::Reducer::None) {
    element = store(out, flat_index(s.axes, s.shape), body);
  } else {
    BufferRef acc = make_buffer(s.name + ".acc", s.dtype, tile.rows * tile.cols, true);
    Expr slot = tile.tiled() ? r * tile.cols + c : te::int_imm(0);
    Expr a = load(acc, slot);
    Stmt step = over_tile(store(acc, slot, combine_reduction(s.reducer, a, body)));
    for (size_t k = s.reduce_axes.size(); k-- > 0;)
      step = for_loop(s.reduce_axes[k].var, s.reduce_axes[k].extent, ForKind::Serial, step);
    Expr result = epilogue ? te::substitute(flatten_loads(epilogue->expr, buffers), {{epilogue->value.get(), a}}) : a;
    element = allocate(acc, block({over_tile(store(acc, slot, flatten_loads(s.init, buffers))), step,
                                   over_tile(store(out, flat_index(s.axes, s.shape), result))}));
  }
  return over_gpu_threads(f, threads, substitute_stmt(element, axis_of), p);
}

SubgraphScheduler gpu_subgraph_scheduler(const GpuScheduleParams& p) {
  return [p](const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, BufferRef>& buffers,
             std::vector<BufferRef>& temporaries) {
    const EpiloguePlan epilogues = plan_epilogues(sg.dag);
    const std::map<const te::TensorNode*, BufferRef> all = with_stage_buffers(sg, epilogues, buffers, temporaries);
    const GpuStageTiles* tuned = p.tuned ? p.tuned(id) : nullptr;
    std::vector<Stmt> stages;
    for (size_t i = 0; i < sg.dag.tensors.size(); ++i) {
      const te::TensorRef& t = sg.dag.tensors[i];
      const std::optional<GpuSharedTile>* tile = nullptr;
      if (tuned)
        if (auto it = tuned->find(i); it != tuned->end()) tile = &it->second;
      auto e = epilogues.by_stage.find(i);
      if (e != epilogues.by_stage.end()) stages.push_back(lower_stage_gpu(t, all, p, &e->second, tile));
      else if (!epilogues.chain_members.count(t.get())) stages.push_back(lower_stage_gpu(t, all, p, nullptr, tile));
    }
    return block(std::move(stages));
  };
}

Stmt gpu_kernels_only(const Stmt& model_body, const GpuScheduleParams& p) {
  std::vector<Stmt> stmts = model_body && model_body->kind == StmtKind::Block ? model_body->body : std::vector<Stmt>{model_body};
  for (Stmt& s : stmts) {
    if (!s || (s->kind == StmtKind::Block && s->body.empty())) continue;
    if (s->kind == StmtKind::For && s->for_kind == ForKind::GpuBlock) continue;
    if (s->kind == StmtKind::For && s->body[0] && s->body[0]->kind == StmtKind::Store) {
      s = over_gpu_threads(s->var, s->extent, s->body[0], p);
      continue;
    }
    throw Error("GPU lowering: a statement of the model is neither a kernel nor a plain copy loop:\n" + print_stmt(s));
  }
  return block(std::move(stmts));
}

}  // namespace kiln::lower
