// LSTM, GRU and RNN: shape inference and the reference kernel. The kernel follows the spec's
// equations one batch row at a time, running each row for its own sequence length, so it shares no
// formulation with the compiled expansion (masked steps over the whole batch, expand_recurrent.h).
#include <algorithm>

#include "frontend/ops/nn_common.h"
#include "frontend/ops/op_registry.h"
#include "frontend/ops/recurrent_spec.h"

namespace kiln::nn {
namespace {

using recurrent::Cell;
using recurrent::Spec;

std::vector<const Shape*> input_shapes(const InferContext& c) {
  std::vector<const Shape*> in;
  for (size_t i = 0; i < c.num_inputs(); ++i) in.push_back(c.has_input(i) ? &c.shape(i) : nullptr);
  return in;
}

std::vector<const Shape*> input_shapes(const EvalContext& c) {
  std::vector<const Shape*> in;
  for (size_t i = 0; i < c.num_inputs(); ++i) in.push_back(c.has_input(i) ? &c.input(i).shape() : nullptr);
  return in;
}

void infer_recurrent(InferContext& c) {
  const Spec s = recurrent::read_spec(c.node(), input_shapes(c));
  const DType t = c.dtype(recurrent::kX);
  if (!is_float(t)) c.unsupported("input 'X' has dtype " + dtype_name(t) + ", expected a float type");
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (size_t i = 0; i < c.num_inputs() && i < 8; ++i) {
    if (!c.has_input(i)) continue;
    const DType want = i == recurrent::kSeqLens ? DType::Int32 : t;
    if (c.dtype(i) != want)
      c.fail(std::string("input '") + names[i] + "' has dtype " + dtype_name(c.dtype(i)) + ", expected " + dtype_name(want));
  }
  c.set_output(0, t, s.y_shape());
  c.set_output(1, t, s.state_shape());
  if (s.cell == Cell::Lstm) c.set_output(2, t, s.state_shape());
}

// The reference: per direction, per batch row, the spec's recurrence over that row's steps.
class Reference {
 public:
  Reference(const EvalContext& c, const Spec& s) : c_(c), s_(s) {}

  void run(Tensor& y, Tensor& y_h, Tensor& y_c) {
    for (int64_t d = 0; d < s_.directions; ++d)
      for (int64_t b = 0; b < s_.batch; ++b) run_row(d, b, y, y_h, y_c);
  }

 private:
  double in(size_t i, int64_t index) const { return c_.has_input(i) ? c_.input(i).get_double(index) : 0.0; }
  int64_t state_index(int64_t d, int64_t b, int64_t j) const {
    return (s_.layout == 0 ? d * s_.batch + b : b * s_.directions + d) * s_.hidden + j;
  }
  int64_t x_index(int64_t t, int64_t b, int64_t k) const {
    return (s_.layout == 0 ? t * s_.batch + b : b * s_.seq + t) * s_.input + k;
  }
  int64_t y_index(int64_t t, int64_t d, int64_t b, int64_t j) const {
    return (s_.layout == 0 ? (t * s_.directions + d) * s_.batch + b : (b * s_.seq + t) * s_.directions + d) * s_.hidden + j;
  }
  double clip(double v) const { return s_.clip > 0 ? std::clamp(v, -s_.clip, s_.clip) : v; }

  // W x_t + Wb + Rb for gate row r of direction d (the recurrent part is added by the cell).
  double input_part(int64_t d, int64_t t, int64_t b, int64_t r) const {
    const int64_t gh = s_.gates * s_.hidden;
    double v = in(recurrent::kB, d * 2 * gh + r);
    for (int64_t k = 0; k < s_.input; ++k) v += in(recurrent::kW, (d * gh + r) * s_.input + k) * in(recurrent::kX, x_index(t, b, k));
    return v;
  }
  double recurrent_bias(int64_t d, int64_t r) const { return in(recurrent::kB, d * 2 * s_.gates * s_.hidden + s_.gates * s_.hidden + r); }
  // R row r of direction d times v.
  double recurrent_part(int64_t d, int64_t r, const std::vector<double>& v) const {
    double sum = 0;
    for (int64_t k = 0; k < s_.hidden; ++k) sum += in(recurrent::kR, (d * s_.gates * s_.hidden + r) * s_.hidden + k) * v[k];
    return sum;
  }

  void run_row(int64_t d, int64_t b, Tensor& y, Tensor& y_h, Tensor& y_c) {
    const int64_t hs = s_.hidden;
    const int64_t len = c_.has_input(recurrent::kSeqLens) ? c_.input(recurrent::kSeqLens).get_int(b) : s_.seq;
    if (len < 0 || len > s_.seq)
      c_.fail("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(len) + ", outside 0.." + std::to_string(s_.seq));
    std::vector<double> h(hs), cell(hs);
    for (int64_t j = 0; j < hs; ++j) {
      h[j] = in(recurrent::kInitialH, state_index(d, b, j));
      if (s_.cell == Cell::Lstm) cell[j] = in(recurrent::kInitialC, state_index(d, b, j));
    }
    const auto& act = s_.activations[d];
    for (int64_t step = 0; step < len; ++step) {
      const int64_t t = s_.reversed(d) ? len - 1 - step : step;
      auto gate = [&](int64_t g, int64_t j) {
        return input_part(d, t, b, g * hs + j) + recurrent_bias(d, g * hs + j) + recurrent_part(d, g * hs + j, h);
      };
      // GRU: the reset gate r, and r * h, which the candidate reads whole (linear_before_reset 0).
      std::vector<double> reset(hs), reset_h(hs);
      if (s_.cell == Cell::Gru)
        for (int64_t k = 0; k < hs; ++k) {
          reset[k] = recurrent::apply(act[0], clip(gate(1, k)));
          reset_h[k] = reset[k] * h[k];
        }
      std::vector<double> next(hs);
      for (int64_t j = 0; j < hs; ++j) {
        if (s_.cell == Cell::Rnn) {
          next[j] = recurrent::apply(act[0], clip(gate(0, j)));
        } else if (s_.cell == Cell::Lstm) {
          auto peep = [&](int64_t k, double cv) { return in(recurrent::kP, d * 3 * hs + k * hs + j) * cv; };
          const double i = recurrent::apply(act[0], clip(gate(0, j) + peep(0, cell[j])));
          const double f = s_.input_forget ? 1.0 - i : recurrent::apply(act[0], clip(gate(2, j) + peep(2, cell[j])));
          const double g = recurrent::apply(act[1], clip(gate(3, j)));
          cell[j] = f * cell[j] + i * g;  // cell[j] is read only by this j
          const double o = recurrent::apply(act[0], clip(gate(1, j) + peep(1, cell[j])));
          next[j] = o * recurrent::apply(act[2], cell[j]);
        } else {
          const double z = recurrent::apply(act[0], clip(gate(0, j)));
          const int64_t row = 2 * hs + j;
          const double pre = s_.linear_before_reset
                                 ? input_part(d, t, b, row) + reset[j] * (recurrent_part(d, row, h) + recurrent_bias(d, row))
                                 : input_part(d, t, b, row) + recurrent_part(d, row, reset_h) + recurrent_bias(d, row);
          const double candidate = recurrent::apply(act[1], clip(pre));
          next[j] = (1 - z) * candidate + z * h[j];
        }
      }
      h = next;
      for (int64_t j = 0; j < hs; ++j) y.set_double(y_index(t, d, b, j), h[j]);
    }
    for (int64_t j = 0; j < hs; ++j) {
      y_h.set_double(state_index(d, b, j), h[j]);
      if (s_.cell == Cell::Lstm) y_c.set_double(state_index(d, b, j), cell[j]);
    }
  }

  const EvalContext& c_;
  const Spec& s_;
};

void eval_recurrent(EvalContext& c) {
  const Spec s = recurrent::read_spec(c.node(), input_shapes(c));
  const DType t = c.input(recurrent::kX).dtype();
  Tensor y(t, s.y_shape()), y_h(t, s.state_shape()), y_c(t, s.state_shape());  // zero where no step ran
  Reference(c, s).run(y, y_h, y_c);
  c.set_output(0, std::move(y));
  c.set_output(1, std::move(y_h));
  if (s.cell == Cell::Lstm) c.set_output(2, std::move(y_c));
}

OpDef recurrent_op(const std::string& type) {
  OpDef d;
  d.op_type = type;
  d.infer = infer_recurrent;
  d.eval = eval_recurrent;
  // Per step and direction: the gates' two matmuls, then about ten element-wise ops per hidden unit.
  d.flops = [](const NodeShapes& s) {
    const Shape &x = s.in[recurrent::kX], &w = s.in[recurrent::kW], &r = s.in[recurrent::kR];
    const double steps = static_cast<double>(x[0] * x[1] * w[0]);
    return steps * (2.0 * static_cast<double>(w[1]) * static_cast<double>(w[2] + r[2]) + 10.0 * static_cast<double>(r[2]));
  };
  return d;
}

}  // namespace

void register_recurrent_ops(OpRegistry& r) {
  for (const char* type : {"LSTM", "GRU", "RNN"}) r.add(recurrent_op(type));
}

}  // namespace kiln::nn
