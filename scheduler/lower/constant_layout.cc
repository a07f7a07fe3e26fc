#include "scheduler/lower/constant_layout.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "frontend/ir/error.h"
#include "scheduler/te/affine.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

// How one load indexes a source: the loops its index moves with (outermost first) with the stride
// along each, and the index where all of them are 0.
struct Reading {
  std::vector<std::pair<const StmtNode*, int64_t>> loops;
  int64_t offset = 0;
  bool operator==(const Reading&) const = default;
};

// Every source's reading, or none for a source read in a way the rewrite cannot follow.
class Readings {
 public:
  explicit Readings(const std::vector<BufferRef>& sources) {
    for (const BufferRef& b : sources) source_[b->node.get()] = b;
  }

  void stmt(const Stmt& s) {
    if (!s) return;
    if (s->kind == StmtKind::For) loops_.push_back(s.get());
    for (const Expr* e : {&s->index, &s->value, &s->cond})
      if (*e) te::visit_loads(*e, [&](const Expr& l) { read(l); });
    if (s->buffer) refuse(s->buffer->node.get());  // written, allocated or prefetched: not a plain read
    for (const BufferRef& b : s->args)
      if (b) refuse(b->node.get());
    for (const Stmt& b : s->body) stmt(b);
    if (s->kind == StmtKind::For) loops_.pop_back();
  }

  // The sources every load reads the same way, with that reading.
  std::map<const te::TensorNode*, Reading> usable() const {
    std::map<const te::TensorNode*, Reading> out;
    for (const auto& [node, r] : reading_)
      if (r && !refused_.count(node)) out.emplace(node, *r);
    return out;
  }

 private:
  void refuse(const te::TensorNode* node) {
    if (source_.count(node)) refused_.insert(node);
  }

  void read(const Expr& load) {
    const te::TensorNode* node = load->tensor.get();
    if (!source_.count(node) || refused_.count(node)) return;
    const te::Affine a = te::affine_form(load->args[0]);
    Reading r;
    r.offset = a.constant;
    std::vector<std::pair<size_t, int64_t>> at;  // position in loops_, stride
    for (const auto& [atom, stride] : a.terms) {
      if (stride == 0) continue;
      auto loop = std::find_if(loops_.begin(), loops_.end(), [&](const StmtNode* f) { return f->var.get() == atom.get(); });
      if (loop == loops_.end()) return refuse(node);  // not a loop around the load: a computed index
      if ((*loop)->extent > 1) at.emplace_back(static_cast<size_t>(loop - loops_.begin()), stride);
    }
    std::sort(at.begin(), at.end());
    for (const auto& [k, stride] : at) r.loops.emplace_back(loops_[k], stride);
    auto [it, first] = reading_.emplace(node, r);
    if (!first && it->second != r) refuse(node);
  }

  std::map<const te::TensorNode*, BufferRef> source_;
  std::vector<const StmtNode*> loops_;
  std::map<const te::TensorNode*, std::optional<Reading>> reading_;
  std::set<const te::TensorNode*> refused_;
};

// `s` with every load of a key of `moved` replaced by its value.
Stmt replace_loads(const Stmt& s, const std::map<const te::TensorNode*, Expr>& moved) {
  if (!s) return s;
  auto copy = std::make_shared<StmtNode>(*s);
  const auto replaced = [&](const Expr& l) -> Expr {
    auto it = moved.find(l->tensor.get());
    return it == moved.end() ? nullptr : it->second;
  };
  for (Expr* e : {&copy->index, &copy->value, &copy->cond})
    if (*e) *e = te::rewrite_loads(*e, replaced);
  for (Stmt& b : copy->body) b = replace_loads(b, moved);
  return copy;
}

}  // namespace

Stmt rewrite_constant_layouts(const Stmt& s, const std::vector<BufferRef>& sources, std::vector<BufferRef>& temporaries) {
  if (sources.empty()) return s;
  Readings readings(sources);
  readings.stmt(s);
  const auto usable = readings.usable();
  std::map<const te::TensorNode*, Expr> moved;
  for (const BufferRef& src : sources) {
    auto it = usable.find(src->node.get());
    if (it == usable.end() || dtype_size(src->dtype) < 1) continue;
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
    // The rewritten index: row-major over the loops.
    std::vector<int64_t> strides(r.loops.size(), 1);
    for (size_t j = r.loops.size(); j-- > 1;) strides[j - 1] = strides[j] * r.loops[j].first->extent;
    if (r.offset == 0 && size == src->size && strides == layout->source_strides) continue;  // already in this order
    auto b = std::make_shared<Buffer>(*make_buffer(src->name + ".tiled", src->dtype, size));
    b->relayout = layout;
    Expr index;
    for (size_t j = 0; j < r.loops.size(); ++j) {
      Expr x = strides[j] == 1 ? r.loops[j].first->var : r.loops[j].first->var * strides[j];
      index = index ? index + x : x;
    }
    moved[src->node.get()] = load(b, index ? index : te::int_imm(0));
    temporaries.push_back(b);
  }
  return moved.empty() ? s : replace_loads(s, moved);
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
  Expr at = te::int_imm(l.offset), index;
  for (size_t j = 0; j < l.extents.size(); ++j) {
    vars.push_back(te::var("l" + std::to_string(j)));
    at = at + vars.back() * l.source_strides[j];
    index = index ? index * l.extents[j] + vars.back() : vars.back();
  }
  if (!index) index = te::int_imm(0);
  Stmt s = if_then_else(at >= te::int_imm(0) && at < te::int_imm(l.source->size), store(b, index, load(l.source, at)),
                        store(b, index, te::const_of(b->dtype, 0)));
  for (size_t j = l.extents.size(); j-- > 0;) s = for_loop(vars[j], l.extents[j], ForKind::Serial, s);
  return s;
}

}  // namespace kiln::lower
