#include "frontend/ops/recurrent_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace kiln::recurrent {
namespace {

[[noreturn]] void fail(const Node& n, const std::string& msg) { throw Error(n.label() + ": " + msg); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// Which parameters a function takes and their defaults when the node's lists run out: the ONNX
// operators of the same name where there is one (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, ...);
// Affine and ScaledTanh exist only here, as the identity's and tanh's own scale.
struct Parameters {
  bool alpha, beta;
  double default_alpha, default_beta;
};
const Parameters* parameters_of(const std::string& name) {
  static const std::vector<std::pair<std::string, Parameters>> table = {
      {"sigmoid", {false, false, 0, 0}},        {"tanh", {false, false, 0, 0}},
      {"relu", {false, false, 0, 0}},           {"softsign", {false, false, 0, 0}},
      {"softplus", {false, false, 0, 0}},       {"affine", {true, true, 1.0, 0.0}},
      {"leakyrelu", {true, false, 0.01, 0}},    {"thresholdedrelu", {true, false, 1.0, 0}},
      {"scaledtanh", {true, true, 1.0, 1.0}},   {"hardsigmoid", {true, true, 0.2, 0.5}},
      {"elu", {true, false, 1.0, 0}},
  };
  for (const auto& [n, p] : table)
    if (n == name) return &p;
  return nullptr;
}

std::vector<std::string> default_activations(Cell cell) {
  switch (cell) {
    case Cell::Lstm: return {"Sigmoid", "Tanh", "Tanh"};
    case Cell::Gru: return {"Sigmoid", "Tanh"};
    case Cell::Rnn: return {"Tanh"};
  }
  return {};
}

// The activations per direction. The alpha and beta lists are consumed in the order of the node's
// list, each value by the next function that takes that parameter (ONNX Runtime's reading).
std::vector<std::vector<Activation>> read_activations(const Node& n, Cell cell, int64_t dirs) {
  const size_t per_direction = default_activations(cell).size();
  std::vector<std::string> names = n.has_attr("activations") ? n.attr_strings("activations") : std::vector<std::string>{};
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d)
      for (const std::string& a : default_activations(cell)) names.push_back(a);
  if (names.size() == per_direction && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_direction * static_cast<size_t>(dirs))
    fail(n, "attribute 'activations' has " + std::to_string(names.size()) + " functions, expected " +
                std::to_string(per_direction) + " per direction");
  const std::vector<double> alphas = n.attr_floats("activation_alpha"), betas = n.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<std::vector<Activation>> out(static_cast<size_t>(dirs));
  for (size_t i = 0; i < names.size(); ++i) {
    Activation a{lower(names[i])};
    const Parameters* p = parameters_of(a.name);
    if (!p) fail(n, "attribute 'activations': unknown function '" + names[i] + "'");
    if (p->alpha) a.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : p->default_alpha;
    if (p->beta) a.beta = next_beta < betas.size() ? betas[next_beta++] : p->default_beta;
    out[i / per_direction].push_back(a);
  }
  return out;
}

void check_shape(const Node& n, const std::vector<const Shape*>& in, size_t i, const char* what, const Shape& want) {
  if (i >= in.size() || !in[i]) return;
  if (*in[i] != want)
    fail(n, std::string("input '") + what + "' has shape " + shape_str(*in[i]) + ", expected " + shape_str(want));
}

}  // namespace

double apply(const Activation& a, double x) {
  const std::string& f = a.name;
  if (f == "sigmoid") return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
  if (f == "tanh") return std::tanh(x);
  if (f == "relu") return std::max(0.0, x);
  if (f == "affine") return a.alpha * x + a.beta;
  if (f == "leakyrelu") return x >= 0 ? x : a.alpha * x;
  if (f == "thresholdedrelu") return x > a.alpha ? x : 0.0;
  if (f == "scaledtanh") return a.alpha * std::tanh(a.beta * x);
  if (f == "hardsigmoid") return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
  if (f == "elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0);
  if (f == "softsign") return x / (1.0 + std::fabs(x));
  if (f == "softplus") return x > 30 ? x : std::log1p(std::exp(x));
  throw Error("unknown recurrent activation '" + f + "'");
}

Shape Spec::y_shape() const {
  return layout == 0 ? Shape{seq, directions, batch, hidden} : Shape{batch, seq, directions, hidden};
}

Shape Spec::state_shape() const { return layout == 0 ? Shape{directions, batch, hidden} : Shape{batch, directions, hidden}; }

bool is_recurrent(const Node& n) {
  return n.domain.empty() && (n.op_type == "LSTM" || n.op_type == "GRU" || n.op_type == "RNN");
}

Spec read_spec(const Node& n, const std::vector<const Shape*>& in) {
  Spec s;
  s.cell = n.op_type == "LSTM" ? Cell::Lstm : n.op_type == "GRU" ? Cell::Gru : Cell::Rnn;
  s.gates = s.cell == Cell::Lstm ? 4 : s.cell == Cell::Gru ? 3 : 1;
  for (size_t i : {kX, kW, kR})
    if (i >= in.size() || !in[i]) fail(n, "missing required input " + std::to_string(i));
  const Shape &x = *in[kX], &w = *in[kW];
  if (x.size() != 3) fail(n, "input 'X' must have rank 3, got " + shape_str(x));
  if (w.size() != 3) fail(n, "input 'W' must have rank 3, got " + shape_str(w));
  s.layout = n.attr_int("layout", 0);
  if (s.layout != 0 && s.layout != 1) fail(n, "attribute 'layout' must be 0 or 1, got " + std::to_string(s.layout));
  s.seq = s.layout == 0 ? x[0] : x[1];
  s.batch = s.layout == 0 ? x[1] : x[0];
  s.input = x[2];
  const std::string direction = n.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail(n, "attribute 'direction' is '" + direction + "' (forward, reverse or bidirectional)");
  s.directions = direction == "bidirectional" ? 2 : 1;
  s.reverse_only = direction == "reverse";
  s.hidden = n.has_attr("hidden_size") ? n.attr_int("hidden_size", 0) : w[1] / s.gates;
  if (s.hidden <= 0) fail(n, "attribute 'hidden_size' must be positive, got " + std::to_string(s.hidden));
  const int64_t gh = s.gates * s.hidden, dirs = s.directions;
  check_shape(n, in, kW, "W", {dirs, gh, s.input});
  check_shape(n, in, kR, "R", {dirs, gh, s.hidden});
  check_shape(n, in, kB, "B", {dirs, 2 * gh});
  check_shape(n, in, kSeqLens, "sequence_lens", {s.batch});
  check_shape(n, in, kInitialH, "initial_h", s.state_shape());
  if (s.cell == Cell::Lstm) {
    check_shape(n, in, kInitialC, "initial_c", s.state_shape());
    check_shape(n, in, kP, "P", {dirs, 3 * s.hidden});
  } else if (in.size() > kInitialC && (in[kInitialC] || (in.size() > kP && in[kP]))) {
    fail(n, "has more inputs than the spec's 6");
  }
  s.clip = n.attr_float("clip", 0.0);
  if (n.has_attr("clip") && !(s.clip > 0)) fail(n, "attribute 'clip' must be positive");
  s.input_forget = s.cell == Cell::Lstm && n.attr_int("input_forget", 0) != 0;
  s.linear_before_reset = s.cell == Cell::Gru && n.attr_int("linear_before_reset", 0) != 0;
  s.activations = read_activations(n, s.cell, dirs);
  return s;
}

}  // namespace kiln::recurrent
