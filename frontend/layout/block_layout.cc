#include "frontend/layout/block_layout.h"

#include "frontend/ops/shape_attributes.h"

#include <cmath>
#include <map>
#include <set>

#include "frontend/passes/channel_constant.h"

namespace kiln {
namespace {

constexpr const char* kDomain = "kiln";

// Elementwise ops that may run on a blocked tensor: each maps a padded channel's 0 to a finite value.
const std::set<std::string>& blockable_unary() {
  static const std::set<std::string> ops = {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                                            "Elu",  "Selu",      "Celu",    "Softplus",    "Clip",      "Identity"};
  return ops;
}
// Div too, by a constant divisor without zeros (a per-channel one is padded with ones; a divisor
// computed at run time would have zeros there, and 0 / 0 in its padded channels).
const std::set<std::string>& blockable_binary() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Max", "Min", "Div"};
  return ops;
}

// Whether blocked shape `s` broadcasts to blocked shape `full` without crossing blocks: the same rank,
// channel blocks and block, and every other axis equal or 1 (a per-channel scale: N x C/b x 1 x 1 x b).
bool broadcasts_within_blocks(const Shape& s, const Shape& full) {
  if (s.size() != full.size() || s[1] != full[1] || s.back() != full.back()) return false;
  for (size_t a = 0; a < s.size(); ++a)
    if (s[a] != full[a] && s[a] != 1) return false;
  return true;
}

class BlockLayout {
 public:
  BlockLayout(Graph& g, int64_t block) : g_(g), block_(block) {}

  int run() {
    for (const auto& in : g_.inputs) produced_.insert(in);
    for (const Node& n : g_.nodes) read_.insert(n.inputs.begin(), n.inputs.end());
    read_.insert(g_.outputs.begin(), g_.outputs.end());
    for (const auto& [name, v] : g_.values)
      if (v.constant) produced_.insert(name);
    for (const Node& n : g_.nodes)
      for (const auto& o : n.outputs) guards_of_value_[o] = n.guards;
    for (Node& n : g_.nodes) {
      node_guards_ = n.guards;
      if (try_conv(n) || try_int8_conv(n) || try_quantize(n) || try_elementwise(n) || try_dropout(n) || try_pool(n) ||
          try_concat(n) || try_slice(n) || try_global_average_pool(n) || try_depth_to_space(n) || try_resize(n))
        continue;
      for (const auto& in : n.inputs) need_nchw(in);
      for (const auto& o : n.outputs) produced_.insert(o);
      out_.push_back(std::move(n));
    }
    node_guards_.clear();
    for (const auto& o : g_.outputs) need_nchw(o);
    g_.nodes = std::move(out_);
    return convs_;
  }

 private:
  std::vector<Guard> guards_of(const std::string& v) const {
    auto it = guards_of_value_.find(v);
    return it == guards_of_value_.end() ? std::vector<Guard>{} : it->second;
  }
  bool is_f32(const std::string& v) const { return !v.empty() && g_.value(v).typed && g_.value(v).dtype == DType::Float32; }
  const Tensor* constant(const std::string& v) const { return v.empty() ? nullptr : g_.value(v).constant.get(); }

  // The channels of NCHW value v (its blocked form pads them to whole blocks).
  int64_t channels(const std::string& v) const { return g_.value(v).shape[1]; }
  // The blocked shape of NCHW value v's shape `s` with `blocks` blocks of b: N x blocks x spatial... x b.
  static Shape blocked_shape(const Shape& s, int64_t blocks, int64_t b) {
    Shape out{s[0], blocks};
    out.insert(out.end(), s.begin() + 2, s.end());
    out.push_back(b);
    return out;
  }
  // A new blocked value standing for NCHW value `v`, of v's dtype.
  std::string add_blocked(const std::string& v, Shape shape) {
    return g_.add_value(v + ".blocked", g_.value(v).dtype, std::move(shape));
  }
  // A node standing for the node being rewritten: it runs under that node's guards (a branch of an
  // If decided at run time).
  Node& emit(const std::string& op, const std::string& name, std::vector<std::string> ins, std::vector<std::string> outs,
             const std::string& domain = kDomain) {
    Node n;
    n.guards = node_guards_;
    n.name = name;
    n.op_type = op;
    n.domain = domain;
    n.opset = 1;
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    for (const auto& o : n.outputs) produced_.insert(o);
    out_.push_back(std::move(n));
    return out_.back();
  }

  // The blocked form of NCHW value v, reordering it (once) when it has none yet, in blocks of `b`
  // (default: the block, or all of v's channels when it has fewer).
  std::string blocked_input(const std::string& v, int64_t b = 0) {
    auto it = blocked_.find(v);
    if (it != blocked_.end()) return it->second;
    const Shape& s = g_.value(v).shape;
    if (b == 0) b = std::min(block_, s[1]);
    const std::string out = add_blocked(v, blocked_shape(s, (s[1] + b - 1) / b, b));
    // Under v's own guards, not its reader's: a later reader under other guards reuses the copy.
    Node& reorder = emit("ReorderToBlocked", v + ".to_blocked", {v}, {out});
    reorder.attrs["block"] = AttrValue(b);
    reorder.guards = guards_of(v);
    blocked_[v] = out;
    return out;
  }

  // A node is about to read v in NCHW: reorder v's blocked form back if v has no NCHW producer.
  void need_nchw(const std::string& v) {
    if (v.empty() || produced_.count(v)) return;
    auto it = blocked_.find(v);
    if (it == blocked_.end()) return;
    Node& reorder = emit("ReorderFromBlocked", v + ".from_blocked", {it->second}, {v});
    reorder.attrs["channels"] = AttrValue(channels(v));
    reorder.guards = guards_of(v);
  }

  // The bias of a blocked conv with `channels` outputs in `blocks` blocks of b: blocks x b, zero-padded.
  std::string packed_bias(const Node& n, const Tensor& bias, int64_t channels, int64_t blocks, int64_t b) {
    Tensor pb(DType::Float32, {blocks, b});
    for (int64_t o = 0; o < channels; ++o) pb.set_double(o, bias.get_double(o));
    return g_.add_constant(n.name + ".packed_bias", std::move(pb));
  }

  // A depthwise conv (one input channel per group, one output per channel) keeps its input's blocks.
  void depthwise(const Node& n, const Tensor& w, const Tensor* bias) {
    const std::string xb = blocked_input(n.inputs[0]);
    const Shape& xs = g_.value(xb).shape;
    const int64_t b = xs[4], cb = xs[1], channels = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3];
    Tensor packed(DType::Float32, {cb, kh, kw, b});
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          packed.set_double(((ch / b * kh + y) * kw + x) * b + ch % b, w.get_double((ch * kh + y) * kw + x));
    std::vector<std::string> ins{xb, g_.add_constant(n.name + ".packed_weight", std::move(packed))};
    if (bias) ins.push_back(packed_bias(n, *bias, channels, cb, b));
    emit_blocked_conv("DepthwiseConvBlocked", n, ins, cb, b);
  }

  // The blocked conv `op` replacing Conv `n`, with n's window attributes, writing `blocks` blocks of b
  // that stand for n's output.
  void emit_blocked_conv(const char* op, const Node& n, const std::vector<std::string>& ins, int64_t blocks, int64_t b) {
    const Shape& ys = g_.value(n.outputs[0]).shape;
    const std::string yb = add_blocked(n.outputs[0], blocked_shape(ys, blocks, b));
    Node& conv = emit(op, n.name, ins, {yb});
    for (const char* a : {"auto_pad", "pads", "strides", "dilations"})
      if (n.has_attr(a)) conv.attrs[a] = n.attrs.at(a);
    blocked_[n.outputs[0]] = yb;
    ++convs_;
  }

  // The block a conv reads its input in when that input has fewer than 4 channels (an image): 1, the
  // NCHW order itself, when the conv pads, since in blocks of 3 the reorder and the zero padding are
  // loops of 3 that no vector covers (ultraface's 3 x 240 x 320 input: 1.15x); otherwise all of them
  // at once, so the reduction's innermost loop covers a pixel's channels (squeezenet's unpadded 7 x 7
  // stem: 2% faster than blocks of 1). 0 when the input has more channels: the usual block.
  int64_t image_block(const Node& n) const {
    const int64_t channels = g_.value(n.inputs[0]).shape[1];
    if (channels >= 4) return 0;
    const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    bool pads = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    for (int64_t p : n.attr_ints("pads", {})) pads |= p != 0;
    return pads ? 1 : channels;
  }

  bool try_conv(const Node& n) {
    if (!n.domain.empty() || n.op_type != "Conv" || n.outputs.size() != 1 || n.inputs.size() < 2) return false;
    // 1-D, 2-D and 3-D convs; depthwise ones 2-D only (DepthwiseConvBlocked).
    const size_t rank = g_.value(n.inputs[0]).shape.size();
    if (!is_f32(n.inputs[0]) || rank < 3 || rank > 5) return false;
    const Tensor* w = constant(n.inputs[1]);
    const Tensor* bias = n.inputs.size() > 2 ? constant(n.inputs[2]) : nullptr;
    if (!w || w->dtype() != DType::Float32 || (n.inputs.size() > 2 && !n.inputs[2].empty() && !bias)) return false;
    const int64_t group = n.attr_int("group", 1), channels = g_.value(n.inputs[0]).shape[1];
    if (group != 1 && groups_fill_blocks(n, *w, group)) {
      grouped(n, *w, bias, group);
      return true;
    }
    if (group != 1) {
      if (rank != 4 || group != channels || w->shape()[0] != channels || w->shape()[1] != 1) return false;
      // A depthwise conv does 2 x taps flops per element it reads: reordering its input into blocks
      // (and back) costs more than the conv does. The 128 x 56 x 56 layer took 0.218 ms blocked with
      // its reorders and 0.087 ms in NCHW, vectors along the row (bench/RESULTS.md, issue 17 step
      // 10). So only one whose input is blocked already moves.
      if (!blocked_.count(n.inputs[0])) return false;
      depthwise(n, *w, bias);
      return true;
    }
    const std::string xb = blocked_input(n.inputs[0], image_block(n));
    const Shape& xs = g_.value(xb).shape;
    emit_conv_blocked(n, xb, packed_conv_weight(n, *w, xs.back(), xs[1]), bias, 1);
    return true;
  }

  // An int8 conv that accumulates in blocks of output channels (int8_dot_layout.h: attribute block,
  // the float block on every target that sets it) reads and writes blocks of codes, so the codes
  // between two such convs, and the per-tensor (de)quantizations, pools and concats on the way, stay
  // blocked: in NCHW each of them was reordered out of the accumulator's blocks and packed into
  // channel quads again (squeezenet int8: bench/RESULTS.md).
  // One whose input is not blocked yet (or whose reduction runs over taps, not channel quads) reads
  // it in NCHW (nchw_input): packing its quads from NCHW rows is as cheap as from blocks, and a
  // reorder in would be one more pass (ultraface's pointwise convs between NCHW depthwise ones).
  bool try_int8_conv(const Node& n) {
    if (n.domain != kDomain || n.op_type != "QLinearConvDot4" || n.outputs.size() != 1) return false;
    auto it = blocked_.find(n.inputs[0]);
    const bool input_blocked = it != blocked_.end() && g_.value(it->second).shape.back() == block_;
    const bool depthwise = int8_depthwise(n);
    if (depthwise ? !input_blocked : n.attr_int("block", 1) != block_) return false;
    const bool blocked_in = input_blocked && (depthwise || g_.value(n.inputs[3]).shape[1] % 4 == 0);  // channel quads
    std::vector<std::string> ins = n.inputs;
    if (blocked_in)
      ins[0] = it->second;
    else
      need_nchw(n.inputs[0]);
    const Shape& ys = g_.value(n.outputs[0]).shape;
    const std::string yb = add_blocked(n.outputs[0], blocked_shape(ys, (ys[1] + block_ - 1) / block_, block_));
    Node& conv = emit("QLinearConvBlocked", n.name, ins, {yb});
    conv.attrs = n.attrs;
    conv.attrs["block"] = AttrValue(block_);
    if (!blocked_in) conv.attrs["nchw_input"] = AttrValue(int64_t{1});
    blocked_[n.outputs[0]] = yb;
    ++convs_;
    return true;
  }

  // A 2-D depthwise int8 conv (one input channel a group, one output a channel) whose input is
  // blocked codes already computes on the blocks (lower_qlinear_depthwise_blocked); as for float ones,
  // one on an NCHW input stays.
  bool int8_depthwise(const Node& n) const {
    const Shape& ws = g_.value(n.inputs[3]).shape;
    const int64_t group = n.attr_int("group", 1);
    return group > 1 && ws.size() == 4 && ws[1] == 1 && ws[0] == group && g_.value(n.inputs[0]).shape.size() == 4 &&
           g_.value(n.inputs[0]).shape[1] == group;
  }

  // QuantizeLinear / DequantizeLinear of a blocked tensor with one constant scale and zero point map
  // each element on its own, so they run on the blocks. A padded channel's code or value maps to a
  // finite one, which the next blocked conv weighs 0.
  bool try_quantize(const Node& n) {
    if (!n.domain.empty() || (n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") || n.outputs.size() != 1 ||
        n.inputs.size() < 2 || !blocked_.count(n.inputs[0]) || n.attr_int("block_size", 0) != 0)
      return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (!n.inputs[i].empty() && (!constant(n.inputs[i]) || constant(n.inputs[i])->size() != 1)) return false;
    std::vector<std::string> ins = n.inputs;
    ins[0] = blocked_.at(n.inputs[0]);
    const std::string ob = add_blocked(n.outputs[0], g_.value(ins[0]).shape);
    Node& q = emit(n.op_type, n.name, ins, {ob}, "");
    q.opset = n.opset;
    q.attrs = n.attrs;
    q.attrs.erase("axis");  // per-tensor: the blocked rank differs
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // Whether grouped Conv n's groups fill whole blocks of input and output channels (ResNeXt's later
  // stages: 16 or 32 channels a group), so that each output block reads whole input blocks of its
  // own group and the conv runs on the blocks. Narrower groups stay in NCHW.
  bool groups_fill_blocks(const Node& n, const Tensor& w, int64_t group) const {
    const int64_t in_per_group = w.shape()[1], out_per_group = w.shape()[0] / group;
    if (in_per_group % block_ != 0 || out_per_group % block_ != 0) return false;
    auto it = blocked_.find(n.inputs[0]);
    return it == blocked_.end() || g_.value(it->second).shape.back() == block_;
  }

  void grouped(const Node& n, const Tensor& w, const Tensor* bias, int64_t group) {
    const std::string xb = blocked_input(n.inputs[0], block_);
    emit_conv_blocked(n, xb, packed_conv_weight(n, w, block_, w.shape()[1] / block_), bias, group);
  }

  // Conv n's weights M x C x K... in the order a blocked conv reads them: M/bo x in_blocks x K... x bi
  // x bo, with `in_blocks` = C/bi the input blocks each output block reads (its group's).
  std::string packed_conv_weight(const Node& n, const Tensor& w, int64_t bi, int64_t in_blocks) {
    const Shape& ws = w.shape();
    const int64_t bo = block_, m = ws[0], c = ws[1], taps = num_elements(Shape(ws.begin() + 2, ws.end())), mb = (m + bo - 1) / bo;
    Shape packed_shape{mb, in_blocks};
    packed_shape.insert(packed_shape.end(), ws.begin() + 2, ws.end());
    packed_shape.insert(packed_shape.end(), {bi, bo});
    Tensor packed(DType::Float32, packed_shape);
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t k = 0; k < taps; ++k)
          packed.set_double((((o / bo * in_blocks + i / bi) * taps + k) * bi + i % bi) * bo + o % bo,
                            w.get_double((o * c + i) * taps + k));
    return g_.add_constant(n.name + ".packed_weight", std::move(packed));
  }

  // The ConvBlocked replacing Conv n: blocked input xb, packed weights, n's bias packed, `group` groups.
  void emit_conv_blocked(const Node& n, const std::string& xb, const std::string& packed_weight, const Tensor* bias,
                         int64_t group) {
    const int64_t m = g_.value(n.inputs[1]).shape[0], bo = block_, mb = (m + bo - 1) / bo;
    std::vector<std::string> ins{xb, packed_weight};
    if (bias) ins.push_back(packed_bias(n, *bias, m, mb, bo));
    emit_blocked_conv("ConvBlocked", n, ins, mb, bo);
    if (group != 1) out_.back().attrs["group"] = AttrValue(group);
  }

  // A constant operand of a blocked elementwise op: a scalar stays; a per-channel one of a tensor with
  // `channels` channels in blocks of b becomes 1 x Cb x 1 x 1 x b, its padded channels `pad` (1 for a
  // divisor: the padded channels' 0 / 0 would be a NaN, which a reading conv's zero weights do not
  // cancel). Empty when it is neither.
  std::string blocked_constant(const std::string& v, size_t rank, int64_t channels, int64_t b, double pad = 0) {
    const Tensor* t = constant(v);
    if (!t || t->dtype() != DType::Float32) return "";
    const std::optional<std::vector<double>> values = per_channel_values(*t, rank, channels);
    if (!values) return "";
    for (double x : *values)
      if (!std::isfinite(x)) return "";
    if (t->size() == 1) return v;
    Shape ones(rank, 1);
    Tensor packed(DType::Float32, blocked_shape(ones, (channels + b - 1) / b, b));
    for (int64_t ch = 0; ch < packed.size(); ++ch) packed.set_double(ch, ch < channels ? (*values)[ch] : pad);
    return g_.add_constant(v + ".blocked", std::move(packed));
  }

  bool try_elementwise(const Node& n) {
    const bool unary = blockable_unary().count(n.op_type) != 0, binary = blockable_binary().count(n.op_type) != 0;
    if (!n.domain.empty() || (!unary && !binary) || n.outputs.size() != 1 || n.inputs.empty()) return false;
    const Value& out = g_.value(n.outputs[0]);
    if (!is_f32(n.outputs[0]) && n.op_type != "Identity") return false;  // an Identity moves codes too
    // The blocked operand that sets the shape: the first blocked input of the output's shape.
    const std::string* lead = nullptr;
    for (const auto& in : n.inputs)
      if (!in.empty() && blocked_.count(in) && g_.value(in).shape == out.shape && !lead) lead = &in;
    if (!lead) return false;
    const Shape& lead_b = g_.value(blocked_.at(*lead)).shape;
    const bool div = n.op_type == "Div";
    std::vector<std::string> ins;
    std::vector<size_t> to_reorder;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string& in = n.inputs[i];
      if (in.empty()) {
        ins.push_back(in);
      } else if (div && i == 1) {
        std::string c = nonzero_constant(in) ? blocked_constant(in, out.shape.size(), channels(*lead), lead_b.back(), 1) : "";
        if (c.empty()) return false;
        ins.push_back(c);
      } else if (blocked_.count(in)) {
        if (!broadcasts_within_blocks(g_.value(blocked_.at(in)).shape, lead_b)) return false;
        ins.push_back(blocked_.at(in));
      } else if (per_channel_activation(in, out.shape)) {
        to_reorder.push_back(i);  // after every operand passed: a refused op must leave no reorder
        ins.push_back(in);
      } else if (unary && i > 0) {
        if (!constant(in) || constant(in)->size() != 1) return false;  // Clip's min / max
        ins.push_back(in);
      } else {
        std::string c = blocked_constant(in, out.shape.size(), channels(*lead), lead_b.back());
        if (c.empty()) return false;
        ins.push_back(c);
      }
    }
    for (size_t i : to_reorder) ins[i] = blocked_input(ins[i], lead_b.back());
    const std::string ob = add_blocked(n.outputs[0], lead_b);
    Node& copy = emit(n.op_type, n.name, ins, {ob}, n.domain);
    copy.opset = n.opset;
    copy.attrs = n.attrs;
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // A float activation computed at run time that holds one value per channel of an output of shape
  // `out` (N x C x 1 x ... x 1: a squeeze-and-excitation scale); reordering it into blocks is cheap.
  bool per_channel_activation(const std::string& v, const Shape& out) const {
    if (constant(v) || !is_f32(v)) return false;
    const Shape& s = g_.value(v).shape;
    if (s.size() != out.size() || s[1] != out[1] || (s[0] != out[0] && s[0] != 1)) return false;
    for (size_t a = 2; a < s.size(); ++a)
      if (s[a] != 1) return false;
    return true;
  }

  bool nonzero_constant(const std::string& v) const {
    const Tensor* t = constant(v);
    if (!t) return false;
    for (int64_t i = 0; i < t->size(); ++i)
      if (t->get_double(i) == 0) return false;
    return true;
  }

  // Whether something reads n's second output (Dropout's mask, MaxPool's Indices), which the blocked
  // form does not compute.
  bool second_output_read(const Node& n) const {
    return n.outputs.size() > 1 && !n.outputs[1].empty() && read_.count(n.outputs[1]);
  }

  // Dropout is the identity at inference (its OpDef refuses the random training mode): it stays
  // blocked as an Identity when nothing reads its mask.
  bool try_dropout(const Node& n) {
    if (!n.domain.empty() || n.op_type != "Dropout" || !blocked_.count(n.inputs[0]) || !is_f32(n.outputs[0])) return false;
    if (second_output_read(n)) return false;
    const std::string ob = add_blocked(n.outputs[0], g_.value(blocked_.at(n.inputs[0])).shape);
    emit("Identity", n.name, {blocked_.at(n.inputs[0])}, {ob}, "").opset = 13;
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // MaxPool (without its Indices output) and AveragePool of a blocked tensor pool each channel on its
  // own, so they run on the blocks (kiln.MaxPoolBlocked / AveragePoolBlocked, same attributes);
  // padded channels stay 0.
  bool try_pool(const Node& n) {
    if (!n.domain.empty() || (n.op_type != "MaxPool" && n.op_type != "AveragePool") || n.inputs.empty()) return false;
    const DType t = g_.value(n.outputs[0]).dtype;
    const bool codes = n.op_type == "MaxPool" && (t == DType::UInt8 || t == DType::Int8);
    if (!blocked_.count(n.inputs[0]) || !(is_f32(n.outputs[0]) || codes) || second_output_read(n)) return false;
    const Shape& xb = g_.value(blocked_.at(n.inputs[0])).shape;
    const std::string ob = add_blocked(n.outputs[0], blocked_shape(g_.value(n.outputs[0]).shape, xb[1], xb.back()));
    Node& pool = emit(n.op_type + "Blocked", n.name, {blocked_.at(n.inputs[0])}, {ob});
    pool.attrs = n.attrs;
    pool.attrs.erase("storage_order");
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // Concat along channels of blocked tensors whose channels fill whole blocks of one size.
  bool try_concat(const Node& n) {
    if (!n.domain.empty() || n.op_type != "Concat" || n.outputs.size() != 1) return false;
    const DType t = g_.value(n.outputs[0]).dtype;
    if (t != DType::Float32 && t != DType::UInt8 && t != DType::Int8) return false;  // codes: blocked int8 convs
    const int64_t rank = static_cast<int64_t>(g_.value(n.outputs[0]).shape.size());
    const int64_t axis = n.attr_int("axis", 0);
    if (rank < 3 || (axis != 1 && axis != 1 - rank)) return false;
    std::vector<std::string> ins;
    int64_t b = 0;
    for (const auto& in : n.inputs) {
      if (!blocked_.count(in)) return false;
      const Shape& s = g_.value(blocked_.at(in)).shape;
      if ((b && s.back() != b) || channels(in) % s.back() != 0) return false;
      b = s.back();
      ins.push_back(blocked_.at(in));
    }
    const Shape& ys = g_.value(n.outputs[0]).shape;
    const std::string ob = add_blocked(n.outputs[0], blocked_shape(ys, ys[1] / b, b));
    Node& concat = emit("Concat", n.name, ins, {ob}, "");
    concat.opset = 13;
    concat.attrs["axis"] = AttrValue(int64_t{1});
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // Slice of a blocked tensor along channels only, at whole blocks (a merged conv split back into
  // its parts, frontend/subst): the same Slice on the block axis, so the parts stay blocked and, at
  // batch 1, each is one contiguous run of the whole (scheduler/lower/in_place_concat.h). The last
  // part may end in the whole's padded block: its own padding is those channels, which a blocked
  // tensor's readers ignore (they may hold any finite value).
  bool try_slice(const Node& n) {
    if (!n.domain.empty() || n.op_type != "Slice" || n.outputs.size() != 1) return false;
    if (!blocked_.count(n.inputs[0]) || !is_f32(n.outputs[0]) || g_.value(n.inputs[0]).shape.size() < 3) return false;
    const std::optional<std::pair<int64_t, int64_t>> run = slice_run_along(g_, n, 1);
    if (!run) return false;
    const auto [begin, end] = *run;
    const int64_t b = g_.value(blocked_.at(n.inputs[0])).shape.back(), c = channels(n.inputs[0]);
    if (end <= begin || !channel_slice_stays_blocked(begin, end, c, b)) return false;
    const int64_t blocks = (end - begin + b - 1) / b;
    const std::string ob = add_blocked(n.outputs[0], blocked_shape(g_.value(n.outputs[0]).shape, blocks, b));
    auto one = [&](const std::string& name, int64_t v) {
      return g_.add_constant(n.name + "." + name, Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{v}));
    };
    emit("Slice", n.name, {blocked_.at(n.inputs[0]), one("block_start", begin / b), one("block_end", begin / b + blocks), one("block_axis", 1)},
         {ob}, "")
        .opset = 13;
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // DepthToSpace (DCR) of a blocked tensor whose output channels fill whole blocks: input channel
  // (dy * s + dx) * C + c is block (dy * s + dx) * C / b + c / b, so the interleave moves whole blocks
  // of b floats and stays blocked: [N, s, s, C/b, H, W, b] -> [N, C/b, H, s, W, s, b]. A ConvTranspose
  // split into a Conv per phase ends in one (conv_transpose_to_conv.h); in NCHW it was a reorder out,
  // a scalar gather and a reorder back in.
  bool try_depth_to_space(const Node& n) {
    if (!n.domain.empty() || n.op_type != "DepthToSpace" || n.outputs.size() != 1 || !is_f32(n.outputs[0])) return false;
    if (n.attr_string("mode", "DCR") != "DCR" || !blocked_.count(n.inputs[0])) return false;
    const Shape& xb = g_.value(blocked_.at(n.inputs[0])).shape;
    const Shape& ys = g_.value(n.outputs[0]).shape;
    const int64_t s = n.attr_int("blocksize", 0), b = xb.back();
    if (xb.size() != 5 || ys.size() != 4 || s < 1 || ys[1] % b != 0 || channels(n.inputs[0]) != ys[1] * s * s) return false;
    auto shape_constant = [&](const std::string& name, const std::vector<int64_t>& dims) {
      return g_.add_constant(name, Tensor::from_ints(DType::Int64, {static_cast<int64_t>(dims.size())}, dims));
    };
    const int64_t cb = ys[1] / b, h = xb[2], w = xb[3];
    const std::string split = g_.add_value(n.outputs[0] + ".phase_blocks", DType::Float32, {xb[0], s, s, cb, h, w, b});
    emit("Reshape", n.name + ".phase_blocks", {blocked_.at(n.inputs[0]), shape_constant(n.name + ".phase_shape", {xb[0], s, s, cb, h, w, b})},
         {split}, "").opset = 14;
    const std::string moved = g_.add_value(n.outputs[0] + ".interleaved_blocks", DType::Float32, {xb[0], cb, h, s, w, s, b});
    Node& t = emit("Transpose", n.name + ".interleave_blocks", {split}, {moved}, "");
    t.opset = 13;
    t.attrs["perm"] = AttrValue(std::vector<int64_t>{0, 3, 4, 1, 5, 2, 6});
    const std::string ob = add_blocked(n.outputs[0], blocked_shape(ys, cb, b));
    emit("Reshape", n.name, {moved, shape_constant(n.name + ".blocked_shape", {ys[0], cb, ys[2], ys[3], b})}, {ob}, "").opset = 14;
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // Resize of a blocked tensor that keeps its batch and channels resizes every channel's planes on
  // their own, so the same Resize runs over the blocks with the block axis at scale 1: an axis of
  // scale 1 maps each coordinate to itself in every mode and coordinate transformation but
  // tf_crop_and_resize (refused), and the padded channels' zeros stay zeros. YOLOX's two upsampling
  // paths were a reorder out of the blocks, the resize and a reorder back in. Constant scales or sizes
  // only (what the blocked ones are made from); the roi only matters to tf_crop_and_resize and is dropped.
  bool try_resize(const Node& n) {
    if (!n.domain.empty() || n.op_type != "Resize" || n.opset < 11 || n.outputs.size() != 1 || n.inputs.empty()) return false;
    if (!blocked_.count(n.inputs[0]) || !is_f32(n.outputs[0]) || n.has_attr("axes")) return false;
    if (n.attr_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") return false;
    const Shape& xs = g_.value(n.inputs[0]).shape;
    const Shape& ys = g_.value(n.outputs[0]).shape;
    if (xs.size() != ys.size() || xs.size() < 3 || xs[0] != ys[0] || xs[1] != ys[1]) return false;
    const Shape& xb = g_.value(blocked_.at(n.inputs[0])).shape;
    const auto rank = static_cast<int64_t>(xs.size());
    std::vector<std::string> ins{blocked_.at(n.inputs[0]), "", "", ""};
    const Tensor* scales = n.inputs.size() > 2 ? constant(n.inputs[2]) : nullptr;
    const Tensor* sizes = n.inputs.size() > 3 ? constant(n.inputs[3]) : nullptr;
    if (scales && scales->size() > 0) {
      if (scales->size() != rank || scales->get_double(0) != 1 || scales->get_double(1) != 1) return false;
      std::vector<double> v = scales->to_doubles();
      v.push_back(1);
      ins[2] = g_.add_constant(n.name + ".blocked_scales", Tensor::from_doubles(DType::Float32, {rank + 1}, v));
    } else if (sizes && sizes->size() == rank) {
      for (int64_t a = 0; a < rank; ++a)
        if (sizes->get_int(a) != ys[a]) return false;  // keep_aspect_ratio_policy moved them: not this simple case
      const Shape yb = blocked_shape(ys, xb[1], xb.back());
      ins[3] = g_.add_constant(n.name + ".blocked_sizes", Tensor::from_ints(DType::Int64, {rank + 1}, yb));
    } else {
      return false;
    }
    if (ins[3].empty()) ins.pop_back();
    const std::string ob = add_blocked(n.outputs[0], blocked_shape(ys, xb[1], xb.back()));
    Node& resize = emit("Resize", n.name, ins, {ob}, "");
    resize.opset = n.opset;
    resize.attrs = n.attrs;
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  // GlobalAveragePool of a blocked tensor: the mean over its spatial axes, still blocked.
  bool try_global_average_pool(const Node& n) {
    if (!n.domain.empty() || n.op_type != "GlobalAveragePool" || n.outputs.size() != 1 || n.inputs.size() != 1) return false;
    if (!blocked_.count(n.inputs[0]) || !is_f32(n.outputs[0])) return false;
    const Shape& xb = g_.value(blocked_.at(n.inputs[0])).shape;
    std::vector<int64_t> spatial;
    for (int64_t a = 2; a + 1 < static_cast<int64_t>(xb.size()); ++a) spatial.push_back(a);
    const std::string axes = g_.add_constant(n.name + ".axes", Tensor::from_ints(DType::Int64, {static_cast<int64_t>(spatial.size())}, spatial));
    const std::string ob = add_blocked(n.outputs[0], blocked_shape(g_.value(n.outputs[0]).shape, xb[1], xb.back()));
    Node& mean = emit("ReduceMean", n.name, {blocked_.at(n.inputs[0]), axes}, {ob}, "");
    mean.opset = 18;  // axes as an input
    mean.attrs["keepdims"] = AttrValue(int64_t{1});
    blocked_[n.outputs[0]] = ob;
    return true;
  }

  Graph& g_;
  const int64_t block_;
  std::vector<Node> out_;
  std::set<std::string> produced_;  // values with an NCHW producer so far (or inputs, constants)
  std::set<std::string> read_;      // values some node or the graph's outputs read
  std::map<std::string, std::string> blocked_;  // NCHW value -> its blocked form
  std::map<std::string, std::vector<Guard>> guards_of_value_;  // the guards of each value's producer
  std::vector<Guard> node_guards_;  // the guards of the node being rewritten
  int convs_ = 0;
};

}  // namespace

int64_t float_block_for(int vector_bits) { return vector_bits >= 64 ? vector_bits / 32 : 0; }

bool channel_slice_stays_blocked(int64_t begin, int64_t end, int64_t channels, int64_t block) {
  return begin % block == 0 && (end % block == 0 || end == channels);
}

int block_layout(Graph& g, int64_t block) {
  if (block <= 1) return 0;
  return BlockLayout(g, block).run();
}

}  // namespace kiln
