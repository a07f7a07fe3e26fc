#include "scheduler/lower/constant_layout.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "frontend/ir/error.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/te/affine.h"
#include "scheduler/te/analysis.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

// How one load indexes a source: the loops its index moves with (outermost first) with the stride
// along each, and the index where all of them are 0.
struct Reading {
  std::vector<std::pair<const StmtNode*, int64_t>> loops;
  int64_t offset = 0;

  // Whether `o` stores the source the same way: loops of the same extents and strides (a tile's
  // remainder nest has loops of its own that walk the weight as the main nest does).
  bool same_layout(const Reading& o) const {
    if (offset != o.offset || loops.size() != o.loops.size()) return false;
    for (size_t j = 0; j < loops.size(); ++j)
      if (loops[j].first->extent != o.loops[j].first->extent || loops[j].second != o.loops[j].second) return false;
    return true;
  }
};

// The reading of `load` inside `loops` (outermost first); nullopt when its index is not affine in them.
std::optional<Reading> reading_of(const Expr& load, const std::vector<const StmtNode*>& loops) {
  const te::Affine a = te::affine_form(load->args[0]);
  Reading r;
  r.offset = a.constant;
  std::vector<std::pair<size_t, int64_t>> at;  // position in `loops`, stride
  for (const auto& [atom, stride] : a.terms) {
    if (stride == 0) continue;
    auto loop = std::find_if(loops.begin(), loops.end(), [&](const StmtNode* f) { return f->var.get() == atom.get(); });
    if (loop == loops.end()) return std::nullopt;  // not a loop around the load: a computed index
    if ((*loop)->extent > 1) at.emplace_back(static_cast<size_t>(loop - loops.begin()), stride);
  }
  std::sort(at.begin(), at.end());
  for (const auto& [k, stride] : at) r.loops.emplace_back(loops[k], stride);
  return r;
}

// Every source's layout (the first load's reading), or none for a source read in a way the rewrite
// cannot follow.
class Readings {
 public:
  Readings(const Stmt& s, const std::vector<BufferRef>& sources) {
    for (const BufferRef& b : sources) source_.insert(b->node.get());
    walk(s);
  }

  // The sources every load reads the same way, with that reading.
  std::map<const te::TensorNode*, Reading> usable() const {
    std::map<const te::TensorNode*, Reading> out;
    for (const auto& [node, r] : reading_)
      if (!refused_.count(node)) out.emplace(node, r);
    return out;
  }

 private:
  void walk(const Stmt& s) {
    if (!s) return;
    if (s->kind == StmtKind::For) loops_.push_back(s.get());
    for (const Expr* e : {&s->index, &s->value, &s->cond})
      if (*e) te::visit_loads(*e, [&](const Expr& l) { read(l); });
    if (s->buffer) refuse(s->buffer->node.get());  // written, allocated or prefetched: not a plain read
    for (const BufferRef& b : s->args)
      if (b) refuse(b->node.get());
    for (const Stmt& b : s->body) walk(b);
    if (s->kind == StmtKind::For) loops_.pop_back();
  }

  void refuse(const te::TensorNode* node) {
    if (source_.count(node)) refused_.insert(node);
  }

  void read(const Expr& load) {
    const te::TensorNode* node = load->tensor.get();
    if (!source_.count(node) || refused_.count(node)) return;
    std::optional<Reading> r = reading_of(load, loops_);
    if (!r) return refuse(node);
    auto [it, first] = reading_.emplace(node, *r);
    if (!first && !it->second.same_layout(*r)) refuse(node);
  }

  std::set<const te::TensorNode*> source_;
  std::vector<const StmtNode*> loops_;  // around the statement being walked, outermost first
  std::map<const te::TensorNode*, Reading> reading_;
  std::set<const te::TensorNode*> refused_;
};

// `s` with every load of a key of `moved` reading the rewritten buffer, row-major over its own loops.
class Rewriter {
 public:
  explicit Rewriter(const std::map<const te::TensorNode*, BufferRef>& moved) : moved_(moved) {}

  Stmt rewrite(const Stmt& s) {
    if (!s) return s;
    if (s->kind == StmtKind::For) loops_.push_back(s.get());
    auto copy = std::make_shared<StmtNode>(*s);
    for (Expr* e : {&copy->index, &copy->value, &copy->cond})
      if (*e) *e = te::rewrite_loads(*e, [&](const Expr& l) { return moved_load(l); });
    for (Stmt& b : copy->body) b = rewrite(b);
    if (s->kind == StmtKind::For) loops_.pop_back();
    return copy;
  }

 private:
  Expr moved_load(const Expr& l) {
    auto it = moved_.find(l->tensor.get());
    if (it == moved_.end()) return nullptr;
    const std::optional<Reading> r = reading_of(l, loops_);
    if (!r) throw InternalError("layout rewrite of '" + it->second->relayout->source->name + "': a load changed while rewriting");
    Expr index;
    int64_t stride = 1;
    for (size_t j = r->loops.size(); j-- > 0;) {
      const StmtNode* loop = r->loops[j].first;
      Expr x = stride == 1 ? loop->var : loop->var * stride;
      index = index ? x + index : x;
      stride *= loop->extent;
    }
    return load(it->second, index ? index : te::int_imm(0));
  }

  const std::map<const te::TensorNode*, BufferRef>& moved_;
  std::vector<const StmtNode*> loops_;
};

}  // namespace

Stmt rewrite_constant_layouts(const Stmt& s, const std::vector<BufferRef>& sources, std::vector<BufferRef>& temporaries) {
  if (sources.empty()) return s;
  const auto usable = Readings(s, sources).usable();
  std::map<const te::TensorNode*, BufferRef> moved;
  for (const BufferRef& src : sources) {
    auto it = usable.find(src->node.get());
    if (it == usable.end() || dtype_size(src->dtype) < 1 || moved.count(src->node.get())) continue;
    const Reading& r = it->second;
    auto layout = std::make_shared<ConstantLayout>();
    layout->source = src;
    layout->offset = r.offset;
    int64_t size = 1;
    for (const auto& [loop, stride] : r.loops) {
      layout->extents.push_back(loop->extent);
      layout->source_strides.push_back(stride);
      size *= loop->extent;
    }
    if (size > kMaxRelayoutGrowth * src->size) continue;
    std::vector<int64_t> row_major(r.loops.size(), 1);
    for (size_t j = r.loops.size(); j-- > 1;) row_major[j - 1] = row_major[j] * r.loops[j].first->extent;
    if (r.offset == 0 && size == src->size && row_major == layout->source_strides) continue;  // already in this order
    auto b = std::make_shared<Buffer>(*make_buffer(src->name + ".tiled", src->dtype, size));
    b->relayout = layout;
    moved[src->node.get()] = b;
    temporaries.push_back(b);
  }
  return moved.empty() ? s : Rewriter(moved).rewrite(s);
}

Tensor relayout_constant(const Tensor& source, const ConstantLayout& layout) {
  const size_t width = dtype_size(source.dtype());
  int64_t size = 1;
  for (int64_t e : layout.extents) size *= e;
  const auto n = static_cast<int64_t>(source.byte_size() / std::max<size_t>(width, 1));
  if (width < 1 || layout.extents.size() != layout.source_strides.size())
    throw InternalError("layout rewrite of '" + layout.source->name + "': no whole-byte elements or a malformed layout");
  Tensor out(source.dtype(), Shape{size});
  std::vector<int64_t> digit(layout.extents.size(), 0);
  int64_t at = layout.offset;  // the source index of element i
  for (int64_t i = 0; i < size; ++i) {
    if (at >= 0 && at < n) std::memcpy(out.data() + i * width, source.data() + at * width, width);
    for (size_t j = digit.size(); j-- > 0;) {  // the next digits, innermost first
      at += layout.source_strides[j];
      if (++digit[j] < layout.extents[j]) break;
      at -= layout.source_strides[j] * digit[j];
      digit[j] = 0;
    }
  }
  return out;
}

Stmt relayout_nest(const BufferRef& b) {
  const ConstantLayout& l = *b->relayout;
  std::vector<Expr> vars;
  Expr at = te::int_imm(l.offset);
  for (size_t j = 0; j < l.extents.size(); ++j) {
    vars.push_back(te::var("l" + std::to_string(j)));
    at = at + vars.back() * l.source_strides[j];
  }
  const Expr index = flat_index(vars, l.extents);
  Stmt s = if_then_else(at >= te::int_imm(0) && at < te::int_imm(l.source->size), store(b, index, load(l.source, at)),
                        store(b, index, te::const_of(b->dtype, 0)));
  for (size_t j = l.extents.size(); j-- > 0;) s = for_loop(vars[j], l.extents[j], ForKind::Serial, s);
  return s;
}

void fill_on_first_call(LoweredFunc& f) {
  std::vector<Stmt> fill;
  for (const BufferRef& b : f.params)
    if (b->relayout) fill.push_back(relayout_nest(b));
  if (fill.empty()) return;
  BufferRef filled = make_buffer(f.name + ".constants_filled", DType::Int32, 1);
  fill.push_back(store(filled, te::int_imm(0), te::int_imm(1, DType::Int32)));
  f.body = block({if_then_else(te::eq(load(filled, te::int_imm(0)), te::int_imm(0, DType::Int32)), block(std::move(fill))), f.body});
  f.params.push_back(filled);
}

Stmt rewrite_weight_layouts(const Stmt& s, const te::ComputeDAG& dag, const std::map<const te::TensorNode*, BufferRef>& buffers,
                            std::vector<BufferRef>& temporaries) {
  std::vector<BufferRef> weights;
  // Not a convolution's: the layout stage packs those for the default tile already, and rewriting
  // them slowed ResNet-50's 3x3 conv by 1.3x (bench/RESULTS.md).
  for (const te::TensorRef& w : te::reduction_weights(dag, "conv")) {
    auto it = buffers.find(w.get());
    if (it != buffers.end()) weights.push_back(it->second);
  }
  return rewrite_constant_layouts(s, weights, temporaries);
}

}  // namespace kiln::lower
