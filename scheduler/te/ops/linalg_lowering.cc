// Linear algebra as tensor expressions: MatMul, Gemm and Einsum here, plus the family's shared helpers
// and its entry point. Quantized ops live in linalg_quant_lowering.cc, Attention and RotaryEmbedding in
// linalg_attention_lowering.cc.
#include <algorithm>
#include <cctype>
#include <map>

#include "scheduler/te/ops/linalg_common.h"

namespace kiln::te {

// ---- shared helpers

DType compute_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

std::vector<Expr> zero_indices(size_t n) { return std::vector<Expr>(n, int_imm(0)); }

TensorRef cast_stage(const std::string& name, const TensorRef& t, DType to) {
  if (t->dtype == to) return t;
  return compute(name, "elementwise", to, t->shape, [&](const std::vector<Expr>& idx) { return cast(to, at(t, idx)); });
}

MatMulShape matmul_shape(const Node& node, const Shape& a, const Shape& b) {
  MatMulShape s;
  s.d = linalg::matmul_dims(node, a, b);
  s.a_vector = a.size() == 1;
  s.b_vector = b.size() == 1;
  return s;
}

// Output axes: the broadcast batch axes, then m unless A was 1-D, then n unless B was 1-D.
Expr MatMulShape::row(const std::vector<Expr>& out_idx) const {
  return a_vector ? int_imm(0) : out_idx[d.batch.size()];
}

Expr MatMulShape::col(const std::vector<Expr>& out_idx) const { return b_vector ? int_imm(0) : out_idx.back(); }

TensorRef matmul_accumulate(const std::string& name, DType acc, const MatMulShape& s, const OperandFn& a,
                            const OperandFn& b) {
  const linalg::MatMulDims& d = s.d;
  return reduce(name, "matmul", acc, d.out, Reducer::Sum, {d.k},
                [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                  std::vector<Expr> batch(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(d.batch.size()));
                  std::vector<Expr> ai = broadcast_indices(batch, d.batch, d.a_batch);
                  std::vector<Expr> bi = broadcast_indices(batch, d.batch, d.b_batch);
                  if (!s.a_vector) ai.push_back(s.row(idx));
                  ai.push_back(r[0]);
                  bi.push_back(r[0]);
                  if (!s.b_vector) bi.push_back(s.col(idx));
                  return a(ai) * b(bi);
                });
}

namespace {

// ---- MatMul

void lower_matmul(LowerContext& c) {
  const DType t = c.out_dtype(0), acc = compute_dtype(t);
  const TensorRef &a = c.input(0), &b = c.input(1);
  MatMulShape s = matmul_shape(c.node(), a->shape, b->shape);
  // Half types accumulate in float32 and round once at the end.
  TensorRef y = matmul_accumulate(
      c.name(acc == t ? "" : "acc"), acc, s, [&](const std::vector<Expr>& i) { return cast(acc, at(a, i)); },
      [&](const std::vector<Expr>& i) { return cast(acc, at(b, i)); });
  c.set_output(0, cast_stage(c.name(), y, t));
}

// ---- Gemm: Y = alpha * op(A) * op(B) + beta * C

void lower_gemm(LowerContext& c) {
  const Node& n = c.node();
  const DType t = c.out_dtype(0), acc = compute_dtype(t);
  const Shape& out = c.out_shape(0);
  const bool trans_a = n.attr_int("transA", 0) != 0, trans_b = n.attr_int("transB", 0) != 0;
  const double alpha = n.attr_float("alpha", 1.0), beta = n.attr_float("beta", 1.0);
  const TensorRef &a = c.input(0), &b = c.input(1);
  const int64_t k = trans_a ? a->shape[0] : a->shape[1];
  const bool has_c = c.has_input(2);

  // Integers without scaling stay exact (wrapping) like the reference; otherwise alpha and beta are
  // applied in floating point (float64 for integer operands, as the reference does).
  const bool plain_int = !is_float(t) && alpha == 1.0 && (!has_c || beta == 1.0);
  const bool direct = acc == t && alpha == 1.0 && !has_c;
  TensorRef prod = reduce(c.name(direct ? "" : "matmul"), "matmul", acc, out, Reducer::Sum, {k},
                          [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                            Expr av = trans_a ? at(a, {r[0], i[0]}) : at(a, {i[0], r[0]});
                            Expr bv = trans_b ? at(b, {i[1], r[0]}) : at(b, {r[0], i[1]});
                            return cast(acc, av) * cast(acc, bv);
                          });
  if (direct) {
    c.set_output(0, prod);
    return;
  }
  const DType ft = is_float(t) ? acc : DType::Float64;
  c.set_output(0, compute(c.name(), "broadcast", t, out, [&](const std::vector<Expr>& i) {
                 if (plain_int) return at(prod, i) + at(c.input(2), broadcast_indices(i, out, c.shape(2)));
                 Expr v = cast(ft, at(prod, i));
                 if (alpha != 1.0) v = float_imm(alpha, ft) * v;
                 if (has_c) {
                   Expr cv = cast(ft, at(c.input(2), broadcast_indices(i, out, c.shape(2))));
                   v = v + (beta == 1.0 ? cv : float_imm(beta, ft) * cv);
                 }
                 return cast(t, v);
               }));
}

// ---- Einsum

// Labels are the letters' character codes; the axes an ellipsis stands for get kEllipsis0 + e, so the
// implicit output's alphabetical (ASCII) order is plain label order.
constexpr int kEllipsis0 = 256;

struct EinsumTerm {
  std::vector<int> letters;
  int ellipsis_at = -1;  // index into letters before which "..." stands
};

EinsumTerm parse_term(const LowerContext& c, const std::string& text) {
  EinsumTerm t;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == ' ') continue;
    if (ch == '.') {
      if (text.compare(i, 3, "...") != 0 || t.ellipsis_at >= 0) c.fail("malformed ellipsis in '" + text + "'");
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      t.letters.push_back(static_cast<unsigned char>(ch));
    } else {
      c.fail("invalid character '" + std::string(1, ch) + "' in einsum equation");
    }
  }
  return t;
}

// Expands a term's ellipsis into `ell` labels, right-aligned within the `ell_rank` broadcast axes.
std::vector<int> term_labels(const EinsumTerm& t, int ell, int ell_rank) {
  std::vector<int> labels;
  for (size_t j = 0; j <= t.letters.size(); ++j) {
    if (static_cast<int>(j) == t.ellipsis_at)
      for (int e = 0; e < ell; ++e) labels.push_back(kEllipsis0 + ell_rank - ell + e);
    if (j < t.letters.size()) labels.push_back(t.letters[j]);
  }
  return labels;
}

struct EinsumPlan {
  std::vector<std::vector<int>> operand_labels;  // per operand, the label of each axis
  std::vector<int> output_labels;
  std::map<int, int64_t> extent;  // every label used; the largest (non-broadcast) extent
};

EinsumPlan plan_einsum(const LowerContext& c) {
  const std::string eq = c.node().attr_string("equation", "");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<EinsumTerm> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(c, lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != c.num_inputs()) c.fail("equation '" + eq + "' does not match the number of inputs");
  int ell_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].ellipsis_at >= 0) ell_rank = std::max(ell_rank, static_cast<int>(c.rank(i) - terms[i].letters.size()));

  EinsumPlan p;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    int ell = terms[i].ellipsis_at >= 0 ? static_cast<int>(c.rank(i) - terms[i].letters.size()) : 0;
    std::vector<int> labels = term_labels(terms[i], ell, ell_rank);
    if (labels.size() != c.shape(i).size()) c.fail("einsum term does not fit input " + std::to_string(i));
    for (size_t ax = 0; ax < labels.size(); ++ax) {
      int64_t& e = p.extent.try_emplace(labels[ax], 1).first->second;
      e = std::max(e, c.shape(i)[ax]);  // shape inference checked that extents agree or are 1
      ++count[labels[ax]];
    }
    p.operand_labels.push_back(std::move(labels));
  }
  if (arrow == std::string::npos) {
    for (int e = 0; e < ell_rank; ++e) p.output_labels.push_back(kEllipsis0 + e);
    for (auto [label, n] : count)
      if (n == 1 && label < kEllipsis0) p.output_labels.push_back(label);
  } else {
    p.output_labels = term_labels(parse_term(c, eq.substr(arrow + 2)), ell_rank, ell_rank);
  }
  // A label only some inputs carry can have extent 0 somewhere; the max above would hide that.
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t ax = 0; ax < p.operand_labels[i].size(); ++ax)
      if (c.shape(i)[ax] == 0) p.extent[p.operand_labels[i][ax]] = 0;
  return p;
}

// out[output labels] = sum over the other labels of the product of every operand's element.
void lower_einsum(LowerContext& c) {
  const DType t = c.out_dtype(0), acc = compute_dtype(t);
  EinsumPlan p = plan_einsum(c);
  std::vector<int> summed;
  std::vector<int64_t> summed_extent;
  for (auto [label, e] : p.extent)
    if (std::find(p.output_labels.begin(), p.output_labels.end(), label) == p.output_labels.end()) {
      summed.push_back(label);
      summed_extent.push_back(e);
    }
  Shape out;
  for (int l : p.output_labels) out.push_back(p.extent.at(l));

  auto product = [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
    std::map<int, Expr> var_of;
    for (size_t k = 0; k < idx.size(); ++k) var_of[p.output_labels[k]] = idx[k];
    for (size_t k = 0; k < r.size(); ++k) var_of[summed[k]] = r[k];
    Expr prod;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      std::vector<Expr> ii;
      // Repeated labels read the diagonal; extent-1 axes broadcast.
      for (size_t ax = 0; ax < p.operand_labels[i].size(); ++ax)
        ii.push_back(c.shape(i)[ax] == 1 ? int_imm(0) : var_of.at(p.operand_labels[i][ax]));
      Expr v = cast(acc, at(c.input(i), ii));
      prod = prod ? prod * v : v;
    }
    return prod;
  };
  const std::string name = c.name(acc == t ? "" : "acc");
  auto no_sum = [&](const std::vector<Expr>& idx) { return product(idx, {}); };
  TensorRef y = summed.empty() ? compute(name, "injective", acc, out, no_sum)
                               : reduce(name, "reduction", acc, out, Reducer::Sum, summed_extent, product);
  c.set_output(0, cast_stage(c.name(), y, t));
}

}  // namespace

void register_linalg_lowerings(LoweringRegistry& r) {
  r.add({"MatMul", "", lower_matmul});
  r.add({"Gemm", "", lower_gemm});
  r.add({"Einsum", "", lower_einsum});
  register_linalg_quant_lowerings(r);
  register_linalg_attention_lowerings(r);
}

}  // namespace kiln::te
