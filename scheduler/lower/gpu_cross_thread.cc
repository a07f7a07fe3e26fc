#include "scheduler/lower/gpu_cross_thread.h"

#include <algorithm>
#include <functional>
#include <string>

#include "frontend/ir/error.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {

int64_t cross_thread_lanes(const te::Stage& s, const GpuScheduleParams& p) {
  if (s.reducer == te::Reducer::None || s.is_extern() || s.tag == "conv" || s.tag == "matmul") return 0;
  int64_t terms = 1;
  for (const te::IterVar& r : s.reduce_axes) terms *= r.extent;
  if (terms < 64 || num_elements(s.shape) * 4 >= p.min_threads) return 0;
  int64_t lanes = 32;
  while (lanes < 256 && lanes * 2 <= p.threads_per_block && terms > 64 * lanes) lanes *= 2;
  return lanes;
}

Stmt lower_stage_gpu_cross_thread(const te::TensorRef& t, int64_t lanes, const std::map<const te::TensorNode*, BufferRef>& buffers,
                                  const GpuScheduleParams& p, const Epilogue* epilogue) {
  const te::Stage& s = *t->stage;
  if (lanes < 2 || (lanes & (lanes - 1)) != 0 || lanes > std::max<int64_t>(p.threads_per_block, 2))
    throw InternalError("GPU cross-thread reduction: " + std::to_string(lanes) + " lanes for stage '" + s.name + "'");
  const int64_t outputs = num_elements(s.shape);
  Shape extents;
  for (const te::IterVar& r : s.reduce_axes) extents.push_back(r.extent);
  const int64_t terms = num_elements(extents);
  // Outputs per block: as many as p's threads hold, but no more than spreads the outputs over all the
  // multiprocessors (BERT's 128 LayerNorm rows: a warp on each of 128 multiprocessors rather than 16
  // blocks of 8 warps).
  const int64_t spread = (outputs + p.multiprocessors - 1) / std::max<int64_t>(p.multiprocessors, 1);
  const int64_t rows = std::max<int64_t>(1, std::min(p.threads_per_block / lanes, spread));
  const int64_t threads = rows * lanes, blocks = (outputs + rows - 1) / rows;
  const BufferRef part = make_gpu_buffer(s.name + ".part", s.dtype, threads, BufferScope::GpuShared, threads);
  const Expr b = te::var(s.name + ".b");
  const Expr identity = te::reducer_identity(s.reducer, s.dtype);
  // Thread loops of the kernel's phases: `body(t, lane, output)` for each thread t of the block.
  auto phase = [&](const std::string& name, const std::function<Stmt(const Expr&, const Expr&, const Expr&)>& body) {
    const Expr tv = te::var(s.name + "." + name);
    const Expr lane = te::floormod(tv, te::int_imm(lanes));
    const Expr output = b * te::int_imm(rows) + (rows > 1 ? te::floordiv(tv, te::int_imm(lanes)) : te::int_imm(0));
    return for_loop(tv, threads, ForKind::GpuThread, body(tv, lane, output));
  };
  // The stage's axes at output `o`.
  auto at_output = [&](const Expr& o) {
    std::map<const te::ExprNode*, Expr> m;
    const std::vector<Expr> d = row_major_digits(o, s.shape);
    for (size_t a = 0; a < s.axes.size(); ++a) m[s.axes[a].get()] = d[a];
    return m;
  };
  const bool ragged = outputs % rows != 0;

  // Each lane's partial: lane 0 starts from the stage's initial value, the others from the identity.
  Stmt partials = phase("lanes", [&](const Expr& tv, const Expr& lane, const Expr& output) {
    std::map<const te::ExprNode*, Expr> m = at_output(output);
    const Expr k = te::var(s.name + ".k"), f = k * te::int_imm(lanes) + lane;
    const std::vector<Expr> r = row_major_digits(f, extents);
    for (size_t j = 0; j < s.reduce_axes.size(); ++j) m[s.reduce_axes[j].var.get()] = r[j];
    const Expr term = te::substitute(flatten_loads(s.body, buffers), m);
    const Expr start = te::select(te::eq(lane, te::int_imm(0)), te::substitute(flatten_loads(s.init, buffers), m), identity);
    Stmt step = store(part, tv, combine_reduction(s.reducer, load(part, tv), term));
    if (terms % lanes) step = if_then_else(f < te::int_imm(terms), step);
    Stmt own = block({store(part, tv, start), for_loop(k, (terms + lanes - 1) / lanes, ForKind::Serial, step)});
    // Threads past the last output hold the identity; only their own group combines it.
    return ragged ? if_then_else(output < te::int_imm(outputs), own, store(part, tv, identity)) : own;
  });
  std::vector<Stmt> kernel{partials, barrier()};
  for (int64_t half = lanes / 2; half >= 1; half /= 2) {
    kernel.push_back(phase("fold" + std::to_string(half), [&](const Expr& tv, const Expr& lane, const Expr&) {
      return if_then_else(lane < te::int_imm(half),
                          store(part, tv, combine_reduction(s.reducer, load(part, tv), load(part, tv + te::int_imm(half)))));
    }));
    kernel.push_back(barrier());
  }
  kernel.pop_back();  // nothing reads part after the last fold but its own lane 0
  kernel.push_back(phase("store", [&](const Expr& tv, const Expr& lane, const Expr& output) {
    const std::map<const te::ExprNode*, Expr> m = at_output(output);
    const BufferRef& out = buffers.at(epilogue ? epilogue->out.get() : t.get());
    const Expr v = load(part, tv);
    const Expr result = epilogue ? te::substitute(flatten_loads(epilogue->expr, buffers), {{epilogue->value.get(), v}}) : v;
    Expr first = te::eq(lane, te::int_imm(0));
    if (ragged) first = first && output < te::int_imm(outputs);
    return if_then_else(first, store(out, te::substitute(flat_index(s.axes, s.shape), m), te::substitute(result, m)));
  }));
  return for_loop(b, blocks, ForKind::GpuBlock, allocate(part, block(std::move(kernel))));
}

}  // namespace kiln::lower
