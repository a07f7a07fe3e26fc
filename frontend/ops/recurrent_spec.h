/// \file What an LSTM, GRU or RNN node asks for, read once from its attributes and input shapes.
///
/// Why one struct: the reference kernel (recurrent_ops.cc) and the expansion into MatMuls and
/// element-wise steps (frontend/passes/expand_recurrent.h) must agree on every attribute's meaning:
/// gate order, which activation applies where, how activation_alpha/beta are consumed, where clip
/// applies. Both read this, so a disagreement can only be in the arithmetic, which the tests compare.
#pragma once
#include <string>
#include <vector>

#include "frontend/ir/error.h"
#include "frontend/ir/graph.h"

namespace kiln::recurrent {

enum class Cell { Lstm, Gru, Rnn };

/// One activation of the spec's list: "Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu",
/// "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus" (names compare
/// without case, as ONNX Runtime does). `alpha`/`beta` hold the value the function uses.
struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};
double apply(const Activation& a, double x);

/// The shapes and attributes of one node. Gate order within W, R and B is the spec's: LSTM i, o, f, c;
/// GRU z, r, h; RNN one gate. Peepholes P are i, o, f.
struct Spec {
  Cell cell = Cell::Rnn;
  int64_t gates = 1;                    // 4, 3, 1
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  bool reverse_only = false;            // direction "reverse": the one direction runs backwards
  int64_t layout = 0;                   // 0: X [seq, batch, input]; 1: X [batch, seq, input]
  double clip = 0;                      // 0: none; else gate inputs are clipped to [-clip, clip]
  bool input_forget = false;            // LSTM: f = 1 - i
  bool linear_before_reset = false;     // GRU
  /// Per direction, the cell's activations in the spec's order (LSTM f, g, h; GRU f, g; RNN f).
  std::vector<std::vector<Activation>> activations;

  bool reversed(int64_t direction) const { return reverse_only || direction == 1; }
  Shape y_shape() const;    // [seq, dirs, batch, hidden] or layout 1 [batch, seq, dirs, hidden]
  Shape state_shape() const;  // [dirs, batch, hidden] or layout 1 [batch, dirs, hidden]
};

/// Input positions, as the spec numbers them.
enum Input { kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7 };

/// Whether `n` is an LSTM, GRU or RNN of the default domain.
bool is_recurrent(const Node& n);

/// Reads and checks the node against its input shapes (`inputs[i]` nullptr where input i is absent):
/// X, W and R, and B, sequence_lens, initial_h, initial_c and P when given. Throws Error naming the
/// node and the input or attribute.
Spec read_spec(const Node& n, const std::vector<const Shape*>& inputs);

}  // namespace kiln::recurrent
