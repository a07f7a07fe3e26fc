#include "frontend/passes/expand_recurrent.h"

#include <map>
#include <optional>

#include "frontend/ops/recurrent_spec.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/node_emitter.h"
#include "frontend/passes/splice_subgraph.h"
#include "frontend/passes/step_loop_bodies.h"
#include "frontend/ir/step_loop.h"

namespace kiln {
namespace {

using recurrent::Activation;
using recurrent::Cell;
using recurrent::Spec;

// The expansion's nodes (node_emitter.h), with constants of the layer's dtype.
class Emitter : public NodeEmitter {
 public:
  Emitter(Graph& g, const Node& n, DType dtype) : NodeEmitter(g, n), dtype_(dtype) {}

  std::string scalar(double v) { return g_.add_constant(owner_.name + "/scalar", Tensor::scalar_double(dtype_, v)); }
  std::string zeros(const Shape& s) { return g_.add_constant(owner_.name + "/zeros", Tensor(dtype_, s)); }
  std::string constant(Tensor t) { return g_.add_constant(owner_.name + "/const", std::move(t)); }

  // Shorthands for the ops the cells use.
  std::string add(const std::string& a, const std::string& b) { return op("Add", {a, b}); }
  std::string mul(const std::string& a, const std::string& b) { return op("Mul", {a, b}); }
  std::string sub(const std::string& a, const std::string& b) { return op("Sub", {a, b}); }
  std::string matmul(const std::string& a, const std::string& b) { return op("MatMul", {a, b}); }
  std::string transpose(const std::string& x, std::vector<int64_t> perm) { return op("Transpose", {x}, {{"perm", AttrValue(perm)}}); }
  std::string slice(const std::string& x, int64_t axis, int64_t begin, int64_t end) {
    return op("Slice", {x, ints({begin}), ints({end}), ints({axis})});
  }
  std::string unsqueeze(const std::string& x, std::vector<int64_t> axes) { return op("Unsqueeze", {x, ints(axes)}); }
  std::string reshape(const std::string& x, std::vector<int64_t> shape) { return op("Reshape", {x, ints(shape)}); }
  std::string concat(const std::vector<std::string>& xs, int64_t axis, const std::string& out = "") {
    if (xs.size() == 1 && out.empty()) return xs[0];
    return op("Concat", xs, {{"axis", AttrValue(axis)}}, out);
  }
  // Direction d's slice of a per-direction input (its leading axis, or `axis`).
  std::string direction(const std::string& x, int64_t d, int64_t axis = 0) {
    return op("Gather", {x, int64(d)}, {{"axis", AttrValue(axis)}});
  }

 private:
  DType dtype_;
};

// One direction's weights, arranged for the steps.
struct DirectionWeights {
  std::string projected;       // X W^T + biases for every step: [seq * batch, gates * hidden]
  std::string r_t;             // R^T: [hidden, gates * hidden] (GRU: the z and r gates only)
  std::string r_t_candidate;   // GRU: R_h^T [hidden, hidden]
  std::string candidate_bias;  // GRU with linear_before_reset: Rb_h, added inside the reset product
  std::string p_i, p_o, p_f;   // LSTM peepholes [hidden]
  std::string h0, c0;          // [batch, hidden]
};

class Expansion {
 public:
  Expansion(Graph& g, const Node& n, const Spec& s, DType dtype, bool roll)
      : g_(g), n_(n), s_(s), dtype_(dtype), roll_(roll), e_(g, n, dtype) {}

  std::vector<Node> run() {
    // X as rows [seq * batch, input]: the projection is one matrix product with as many rows as
    // steps (a batched product of seq 1-row ones reused each weight once per step).
    const std::string x3 = s_.layout == 0 ? n_.inputs[recurrent::kX] : e_.transpose(n_.inputs[recurrent::kX], {1, 0, 2});
    const std::string x = e_.reshape(x3, {s_.seq * s_.batch, s_.input});
    const int64_t b = s_.batch;
    std::vector<std::string> ys, hs, cs;
    for (int64_t d = 0; d < s_.directions; ++d) {
      const DirectionWeights w = weights(x, d);
      if (roll_) {
        rolled_steps(w, d, ys, hs, cs);
        continue;
      }
      std::vector<std::string> y(static_cast<size_t>(s_.seq));
      std::string h = w.h0, c = w.c0;
      for (int64_t step = 0; step < s_.seq; ++step) {
        const int64_t t = s_.reversed(d) ? s_.seq - 1 - step : step;
        std::string c_next;
        const std::string h_next = cell_step(w, s_.activations[d], e_.slice(w.projected, 0, t * b, (t + 1) * b), h, c, c_next);
        if (const std::optional<std::string> m = mask(t)) {
          y[t] = e_.op("Where", {*m, h_next, e_.scalar(0)});
          h = e_.op("Where", {*m, h_next, h});
          if (!c_next.empty()) c = e_.op("Where", {*m, c_next, c});
        } else {
          y[t] = h = h_next;
          c = c_next;
        }
      }
      ys.push_back(e_.reshape(e_.concat(y, 0), {s_.seq, 1, b, s_.hidden}));  // [seq, 1, batch, hidden]
      hs.push_back(e_.unsqueeze(h, {0}));  // [1, batch, hidden]
      if (!c.empty()) cs.push_back(e_.unsqueeze(c, {0}));
    }
    write_output(0, ys, 1, {2, 0, 1, 3});
    write_output(1, hs, 0, {1, 0, 2});
    if (s_.cell == Cell::Lstm) write_output(2, cs, 0, {1, 0, 2});
    return std::move(e_.nodes());
  }

 private:
  bool has(size_t i) const { return i < n_.inputs.size() && !n_.inputs[i].empty(); }
  const std::string& in(size_t i) const { return n_.inputs[i]; }

  DirectionWeights weights(const std::string& x, int64_t d) {
    const int64_t hs = s_.hidden, gh = s_.gates * hs;
    DirectionWeights w;
    w.projected = e_.matmul(x, e_.transpose(e_.direction(in(recurrent::kW), d), {1, 0}));
    const std::string r = e_.direction(in(recurrent::kR), d);
    if (s_.cell == Cell::Gru) {
      w.r_t = e_.transpose(e_.slice(r, 0, 0, 2 * hs), {1, 0});
      w.r_t_candidate = e_.transpose(e_.slice(r, 0, 2 * hs, 3 * hs), {1, 0});
    } else {
      w.r_t = e_.transpose(r, {1, 0});
    }
    if (has(recurrent::kB)) {
      const std::string b = e_.direction(in(recurrent::kB), d);
      std::string rb = e_.slice(b, 0, gh, 2 * gh);
      if (s_.linear_before_reset) {
        // The candidate's recurrent bias is added inside the reset product, not to the projection.
        w.candidate_bias = e_.slice(rb, 0, 2 * hs, 3 * hs);
        std::vector<double> keep(static_cast<size_t>(gh), 1.0);
        for (int64_t j = 2 * hs; j < gh; ++j) keep[j] = 0.0;
        rb = e_.mul(rb, e_.constant(Tensor::from_doubles(g_.value(in(recurrent::kX)).dtype, {gh}, keep)));
      }
      w.projected = e_.add(w.projected, e_.add(e_.slice(b, 0, 0, gh), rb));
    }
    if (s_.cell == Cell::Lstm && has(recurrent::kP)) {
      const std::string p = e_.direction(in(recurrent::kP), d);
      w.p_i = e_.slice(p, 0, 0, hs);
      w.p_o = e_.slice(p, 0, hs, 2 * hs);
      w.p_f = e_.slice(p, 0, 2 * hs, 3 * hs);
    }
    auto initial = [&](size_t i) {
      return has(i) ? e_.direction(in(i), d, s_.layout == 0 ? 0 : 1) : e_.zeros({s_.batch, hs});
    };
    w.h0 = initial(recurrent::kInitialH);
    if (s_.cell == Cell::Lstm) w.c0 = initial(recurrent::kInitialC);
    return w;
  }

  std::string clip(const std::string& x) {
    if (!(s_.clip > 0)) return x;
    return st().op("Clip", {x, st().scalar(-s_.clip), st().scalar(s_.clip)});
  }

  std::string activation(const Activation& a, const std::string& x) {
    auto with = [&](const std::string& op, Attributes attrs) { return st().op(op, {x}, std::move(attrs)); };
    if (a.name == "sigmoid") return with("Sigmoid", {});
    if (a.name == "tanh") return with("Tanh", {});
    if (a.name == "relu") return with("Relu", {});
    if (a.name == "softsign") return with("Softsign", {});
    if (a.name == "softplus") return with("Softplus", {});
    if (a.name == "leakyrelu") return with("LeakyRelu", {{"alpha", AttrValue(a.alpha)}});
    if (a.name == "thresholdedrelu") return with("ThresholdedRelu", {{"alpha", AttrValue(a.alpha)}});
    if (a.name == "elu") return with("Elu", {{"alpha", AttrValue(a.alpha)}});
    if (a.name == "hardsigmoid") return with("HardSigmoid", {{"alpha", AttrValue(a.alpha)}, {"beta", AttrValue(a.beta)}});
    if (a.name == "affine") return st().add(st().mul(x, st().scalar(a.alpha)), st().scalar(a.beta));
    if (a.name == "scaledtanh") return st().mul(st().op("Tanh", {st().mul(x, st().scalar(a.beta))}), st().scalar(a.alpha));
    throw Error(n_.label() + ": unknown activation '" + a.name + "'");
  }

  // One step of the cell from the step's projected input `xw` [batch, gates * hidden] and the
  // state h (and c); returns the new h and, for an LSTM, sets c_next.
  std::string cell_step(const DirectionWeights& w, const std::vector<Activation>& act, const std::string& xw,
                        const std::string& h, const std::string& c, std::string& c_next) {
    const int64_t hs = s_.hidden;
    auto gate = [&](const std::string& all, int64_t k) { return st().slice(all, 1, k * hs, (k + 1) * hs); };
    if (s_.cell == Cell::Rnn) return activation(act[0], clip(st().add(xw, st().matmul(h, w.r_t))));
    if (s_.cell == Cell::Gru) {
      const std::string zr = activation(act[0], clip(st().add(st().slice(xw, 1, 0, 2 * hs), st().matmul(h, w.r_t))));
      const std::string z = gate(zr, 0), r = gate(zr, 1), x_h = gate(xw, 2);
      std::string pre;
      if (s_.linear_before_reset) {
        std::string rh = st().matmul(h, w.r_t_candidate);
        if (!w.candidate_bias.empty()) rh = st().add(rh, w.candidate_bias);
        pre = st().add(x_h, st().mul(r, rh));
      } else {
        pre = st().add(x_h, st().matmul(st().mul(r, h), w.r_t_candidate));
      }
      const std::string candidate = activation(act[1], clip(pre));
      return st().add(candidate, st().mul(z, st().sub(h, candidate)));  // (1 - z) * candidate + z * h
    }
    const std::string all = st().add(xw, st().matmul(h, w.r_t));
    std::string i_pre = gate(all, 0), o_pre = gate(all, 1), f_pre = gate(all, 2);
    if (!w.p_i.empty()) {
      i_pre = st().add(i_pre, st().mul(w.p_i, c));
      f_pre = st().add(f_pre, st().mul(w.p_f, c));
    }
    const std::string i = activation(act[0], clip(i_pre));
    const std::string f = s_.input_forget ? st().sub(st().scalar(1), i) : activation(act[0], clip(f_pre));
    const std::string g = activation(act[1], clip(gate(all, 3)));
    c_next = st().add(st().mul(f, c), st().mul(i, g));
    if (!w.p_o.empty()) o_pre = st().add(o_pre, st().mul(w.p_o, c_next));
    return st().mul(activation(act[0], clip(o_pre)), activation(act[2], c_next));
  }

  // Direction d's steps as one kiln.StepLoop (frontend/ir/step_loop.h): the body is one step, its
  // iteration the step's position in the direction's order; h (and c) are carried, the step's output
  // is the scan output, stacked by time (reversed for a reverse direction).
  void rolled_steps(const DirectionWeights& w, int64_t d, std::vector<std::string>& ys, std::vector<std::string>& hs,
                    std::vector<std::string>& cs) {
    const int64_t b = s_.batch, hid = s_.hidden, gh = s_.gates * hid;
    const bool lstm = s_.cell == Cell::Lstm;
    auto body = std::make_shared<Graph>();
    body->name = n_.name + "/steps" + std::to_string(d);
    body->source = g_.source;
    Node owner = n_;
    owner.guards.clear();  // the body's nodes run whenever the loop does
    Emitter be(*body, owner, dtype_);
    auto input = [&](const std::string& name, DType t, Shape shape) {
      body->inputs.push_back(body->add_value(name, t, std::move(shape)));
      return body->inputs.back();
    };
    const std::string iter = input("iter", DType::Int64, {});
    const std::string h = input("h", dtype_, {b, hid});
    const std::string c = lstm ? input("c", dtype_, {b, hid}) : "";
    std::vector<std::string> loop_inputs{w.h0};
    if (lstm) loop_inputs.push_back(w.c0);
    auto invariant = [&](const std::string& outer, const std::string& name, DType t, Shape shape) -> std::string {
      if (outer.empty()) return "";
      loop_inputs.push_back(outer);
      return input(name, t, std::move(shape));
    };
    DirectionWeights bw;
    bw.projected = invariant(e_.reshape(w.projected, {s_.seq, b, gh}), "projected", dtype_, {s_.seq, b, gh});
    bw.r_t = invariant(w.r_t, "r_t", dtype_, {hid, s_.cell == Cell::Gru ? 2 * hid : gh});
    bw.r_t_candidate = invariant(w.r_t_candidate, "r_t_candidate", dtype_, {hid, hid});
    bw.candidate_bias = invariant(w.candidate_bias, "candidate_bias", dtype_, {hid});
    bw.p_i = invariant(w.p_i, "p_i", dtype_, {hid});
    bw.p_o = invariant(w.p_o, "p_o", dtype_, {hid});
    bw.p_f = invariant(w.p_f, "p_f", dtype_, {hid});
    const std::string lens = some_row_stops() ? invariant(in(recurrent::kSeqLens), "sequence_lens", DType::Int32, {b}) : "";

    step_ = &be;
    const std::string t = s_.reversed(d) ? be.op("Sub", {be.int64(s_.seq - 1), iter}) : iter;
    std::string c_next;
    const std::string h_next =
        cell_step(bw, s_.activations[d], be.op("Gather", {bw.projected, t}, {{"axis", AttrValue(int64_t{0})}}), h, c, c_next);
    std::string y = h_next, h_out = h_next, c_out = c_next;
    if (!lens.empty()) {
      const std::string t32 = be.op("Cast", {t}, {{"to", AttrValue(int64_t{6})}});  // int32, as sequence_lens
      const std::string m = be.unsqueeze(be.op("Less", {t32, lens}), {1});
      y = be.op("Where", {m, h_next, be.scalar(0)});
      h_out = be.op("Where", {m, h_next, h});
      if (lstm) c_out = be.op("Where", {m, c_next, c});
    }
    step_ = &e_;
    body->nodes = std::move(be.nodes());
    body->outputs = {h_out};
    if (lstm) body->outputs.push_back(c_out);
    body->outputs.push_back(y);
    infer_shapes(*body);

    StepLoop loop{body, s_.seq, lstm ? 2 : 1, {s_.reversed(d) ? 1 : 0}};
    const std::string h_last = e_.fresh("h_last"), c_last = lstm ? e_.fresh("c_last") : "", steps = e_.fresh("steps");
    std::vector<std::string> outs{h_last};
    if (lstm) outs.push_back(c_last);
    outs.push_back(steps);
    e_.NodeEmitter::add(make_step_loop(steps, loop, std::move(loop_inputs), std::move(outs)));
    ys.push_back(e_.reshape(steps, {s_.seq, 1, b, hid}));  // [seq, 1, batch, hidden]
    hs.push_back(e_.unsqueeze(h_last, {0}));
    if (lstm) cs.push_back(e_.unsqueeze(c_last, {0}));
  }

  // Whether some batch row is shorter than the sequence (then each step masks by row).
  bool some_row_stops() const {
    if (!has(recurrent::kSeqLens)) return false;
    const Tensor* lens = g_.value(in(recurrent::kSeqLens)).constant.get();
    if (!lens) return true;
    for (int64_t b = 0; b < lens->size(); ++b)
      if (lens->get_int(b) < s_.seq) return true;
    return false;
  }

  Emitter& st() { return *step_; }

  // Whether every batch row runs step t: none when no row is shorter; else [batch, 1] booleans.
  std::optional<std::string> mask(int64_t t) {
    if (!has(recurrent::kSeqLens)) return std::nullopt;
    if (const Tensor* lens = g_.value(in(recurrent::kSeqLens)).constant.get()) {
      bool all_run = true;
      for (int64_t b = 0; b < lens->size(); ++b) all_run &= lens->get_int(b) > t;
      if (all_run) return std::nullopt;
    }
    auto it = masks_.find(t);
    if (it != masks_.end()) return it->second;
    const std::string t_value = g_.add_constant(n_.name + "/t", Tensor::scalar_int(DType::Int32, t));
    return masks_[t] = e_.unsqueeze(e_.op("Less", {t_value, in(recurrent::kSeqLens)}), {1});
  }

  // Output i from per-direction parts (each with a direction axis of 1 at `axis`), in the layout.
  void write_output(size_t i, const std::vector<std::string>& parts, int64_t axis, std::vector<int64_t> layout_perm) {
    if (i >= n_.outputs.size() || n_.outputs[i].empty()) return;
    const std::string& out = n_.outputs[i];
    if (s_.layout == 0) {
      if (parts.size() == 1) e_.op("Identity", {parts[0]}, {}, out);
      else e_.concat(parts, axis, out);
    } else {
      e_.op("Transpose", {e_.concat(parts, axis)}, {{"perm", AttrValue(layout_perm)}}, out);
    }
  }

  Graph& g_;
  const Node& n_;
  const Spec& s_;
  DType dtype_;
  bool roll_;
  Emitter e_;
  Emitter* step_ = &e_;  // where a step's nodes go: the model's graph, or a StepLoop's body
  std::map<int64_t, std::string> masks_;
};

}  // namespace

std::vector<Node> expand_recurrent_node(Graph& g, const Node& n, const ExpandOptions& o) {
  std::vector<const Shape*> shapes;
  for (const std::string& in : n.inputs) shapes.push_back(in.empty() ? nullptr : &g.value(in).shape);
  const Spec s = recurrent::read_spec(n, shapes);
  if (s.seq == 0) throw Unsupported(n.label() + ": a sequence of length 0");
  if (!o.roll_steps)
    check_expansion(g, static_cast<size_t>(s.seq * s.directions) * 24, n.label());  // at most ~24 nodes a step
  return Expansion(g, n, s, g.value(n.inputs[recurrent::kX]).dtype, o.roll_steps).run();
}

int expand_recurrent(Graph& g, const ExpandOptions& o) {
  std::vector<Node> nodes;
  int replaced = 0;
  for (Node& n : g.nodes) {
    if (!recurrent::is_recurrent(n)) {
      nodes.push_back(std::move(n));
      continue;
    }
    for (Node& part : expand_recurrent_node(g, n, o)) nodes.push_back(std::move(part));
    ++replaced;
  }
  g.nodes = std::move(nodes);
  if (replaced) {
    infer_shapes(g);
    sink_constant_invariants(g);
  }
  return replaced;
}

}  // namespace kiln
