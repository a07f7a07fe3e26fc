// Einsum: numpy's einsum over any number of operands, with implicit or explicit output, repeated
// labels (diagonals), "..." broadcasting and summation over labels missing from the output.
#include <algorithm>
#include <cctype>

#include "frontend/ops/linalg_internal.h"

namespace kiln::linalg {
namespace {

// Letters a-z, A-Z are labels 0..51; the axes an ellipsis stands for get labels 52, 53, ...
constexpr int kEllipsisLabel0 = 52;

int letter_label(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  return 26 + (ch - 'A');
}

// A parsed equation bound to operand shapes.
struct EinsumPlan {
  std::vector<std::vector<int>> operand_labels;  // per operand, the label of each axis
  std::vector<int> output_labels;
  std::vector<int> summed_labels;  // labels not in the output, summed over
  std::vector<int64_t> extent;     // per label (size kEllipsisLabel0 + ellipsis rank)
  Shape out_shape;
};

// One term of the equation: its letters and where (if anywhere) its ellipsis sits.
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;  // index into letters before which the ellipsis stands
};

Term parse_term(const Node& node, const std::string& text) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == ' ') continue;
    if (ch == '.') {
      if (text.compare(i, 3, "...") != 0 || t.ellipsis_at >= 0)
        throw Error(node.label() + ": malformed ellipsis in einsum term '" + text + "'");
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(ch)))
      throw Error(node.label() + ": invalid character '" + std::string(1, ch) + "' in einsum equation");
    t.letters.push_back(letter_label(ch));
  }
  return t;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    parts.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return parts;
    start = p + 1;
  }
}

EinsumPlan plan_einsum(const Node& node, const std::vector<Shape>& shapes) {
  std::string eq = node.attr_string("equation", "");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> term_texts = split(lhs, ',');
  if (term_texts.size() != shapes.size())
    throw Error(node.label() + ": equation '" + eq + "' has " + std::to_string(term_texts.size()) + " terms for " +
                std::to_string(shapes.size()) + " inputs");

  std::vector<Term> terms;
  int ellipsis_rank = 0;
  for (size_t i = 0; i < term_texts.size(); ++i) {
    terms.push_back(parse_term(node, term_texts[i]));
    int rank = static_cast<int>(shapes[i].size());
    int letters = static_cast<int>(terms[i].letters.size());
    if (terms[i].ellipsis_at < 0 ? rank != letters : rank < letters)
      throw Error(node.label() + ": einsum term '" + term_texts[i] + "' does not fit input " + std::to_string(i) +
                  " of shape " + shape_str(shapes[i]));
    if (terms[i].ellipsis_at >= 0) ellipsis_rank = std::max(ellipsis_rank, rank - letters);
  }

  EinsumPlan plan;
  plan.extent.assign(kEllipsisLabel0 + ellipsis_rank, -1);
  std::vector<int> count(plan.extent.size(), 0);
  auto bind = [&](int label, int64_t ext, size_t input) {
    int64_t& e = plan.extent[label];
    if (e < 0 || e == 1) e = ext;
    else if (ext != 1 && ext != e)
      throw Error(node.label() + ": einsum label extents " + std::to_string(e) + " and " + std::to_string(ext) +
                  " disagree (input " + std::to_string(input) + ")");
  };
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    std::vector<int> labels;
    int ell = static_cast<int>(shapes[i].size() - t.letters.size());
    for (size_t j = 0; j <= t.letters.size(); ++j) {
      if (static_cast<int>(j) == t.ellipsis_at)  // right-aligned within the broadcast ellipsis axes
        for (int e = 0; e < ell; ++e) labels.push_back(kEllipsisLabel0 + ellipsis_rank - ell + e);
      if (j < t.letters.size()) labels.push_back(t.letters[j]);
    }
    for (size_t ax = 0; ax < labels.size(); ++ax) {
      // A label repeated within one operand takes a diagonal, so its extents must agree exactly.
      for (size_t prev = 0; prev < ax; ++prev)
        if (labels[prev] == labels[ax] && shapes[i][prev] != shapes[i][ax])
          throw Error(node.label() + ": repeated einsum label has extents " + std::to_string(shapes[i][prev]) + " and " +
                      std::to_string(shapes[i][ax]) + " in input " + std::to_string(i));
      bind(labels[ax], shapes[i][ax], i);
      ++count[labels[ax]];
    }
    plan.operand_labels.push_back(std::move(labels));
  }

  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis axes, then labels used exactly once, in alphabetical (ASCII) order.
    for (int e = 0; e < ellipsis_rank; ++e) plan.output_labels.push_back(kEllipsisLabel0 + e);
    for (int l = 26; l < 52; ++l)
      if (count[l] == 1) plan.output_labels.push_back(l);
    for (int l = 0; l < 26; ++l)
      if (count[l] == 1) plan.output_labels.push_back(l);
  } else {
    Term out = parse_term(node, eq.substr(arrow + 2));
    for (size_t j = 0; j <= out.letters.size(); ++j) {
      if (static_cast<int>(j) == out.ellipsis_at)
        for (int e = 0; e < ellipsis_rank; ++e) plan.output_labels.push_back(kEllipsisLabel0 + e);
      if (j < out.letters.size()) {
        int l = out.letters[j];
        if (plan.extent[l] < 0) throw Error(node.label() + ": einsum output label is not in any input");
        if (std::count(out.letters.begin(), out.letters.end(), l) > 1)
          throw Error(node.label() + ": einsum output repeats a label");
        plan.output_labels.push_back(l);
      }
    }
  }
  for (size_t l = 0; l < plan.extent.size(); ++l)
    if (plan.extent[l] >= 0 &&
        std::find(plan.output_labels.begin(), plan.output_labels.end(), static_cast<int>(l)) == plan.output_labels.end())
      plan.summed_labels.push_back(static_cast<int>(l));
  for (int l : plan.output_labels) plan.out_shape.push_back(plan.extent[l]);
  return plan;
}

std::vector<Shape> input_shapes(const InferContext& c) {
  std::vector<Shape> s;
  for (size_t i = 0; i < c.num_inputs(); ++i) s.push_back(c.shape(i));
  return s;
}

// Visits every combination of output and summed label values; for each operand keeps the flat offset
// of the element that combination selects, so no index is recomputed from scratch.
template <typename T, typename Mul, typename Add>
std::vector<T> run_einsum(const EinsumPlan& plan, const std::vector<std::vector<T>>& operands,
                          const std::vector<Shape>& shapes, T one, Mul mul, Add add) {
  std::vector<int> loop_labels = plan.output_labels;
  loop_labels.insert(loop_labels.end(), plan.summed_labels.begin(), plan.summed_labels.end());
  size_t nloop = loop_labels.size(), nops = operands.size();
  std::vector<int64_t> loop_extent(nloop);
  for (size_t a = 0; a < nloop; ++a) loop_extent[a] = plan.extent[loop_labels[a]];
  // stride[op][a]: how far operand op's offset moves when loop axis a advances (0 where it broadcasts).
  std::vector<std::vector<int64_t>> stride(nops, std::vector<int64_t>(nloop, 0));
  for (size_t op = 0; op < nops; ++op) {
    std::vector<int64_t> st = strides_of(shapes[op]);
    for (size_t ax = 0; ax < plan.operand_labels[op].size(); ++ax) {
      if (shapes[op][ax] == 1) continue;
      size_t a = std::find(loop_labels.begin(), loop_labels.end(), plan.operand_labels[op][ax]) - loop_labels.begin();
      stride[op][a] += st[ax];
    }
  }
  int64_t out_count = num_elements(plan.out_shape);
  int64_t sum_count = 1;
  for (size_t a = plan.output_labels.size(); a < nloop; ++a) sum_count *= loop_extent[a];
  std::vector<T> out(static_cast<size_t>(out_count), T{});
  if (out_count == 0 || sum_count == 0) return out;
  std::vector<int64_t> idx(nloop, 0), offset(nops, 0);
  for (int64_t o = 0; o < out_count; ++o) {
    T acc{};
    for (int64_t s = 0; s < sum_count; ++s) {
      T prod = one;
      for (size_t op = 0; op < nops; ++op) prod = mul(prod, operands[op][offset[op]]);
      acc = add(acc, prod);
      // Advance the odometer (innermost label last), updating each operand's offset.
      for (size_t a = nloop; a-- > 0;) {
        for (size_t op = 0; op < nops; ++op) offset[op] += stride[op][a];
        if (++idx[a] < loop_extent[a]) break;
        for (size_t op = 0; op < nops; ++op) offset[op] -= stride[op][a] * idx[a];
        idx[a] = 0;
      }
    }
    out[o] = acc;
  }
  return out;
}

OpDef einsum_op() {
  OpDef d;
  d.op_type = "Einsum";
  d.infer = [](InferContext& c) {
    if (c.num_inputs() == 0) c.fail("Einsum needs at least one input");
    for (size_t i = 0; i < c.num_inputs(); ++i) c.require_input(i, "Inputs");
    DType t = same_dtype_inputs(c);
    if (!is_float(t) && !is_integer(t)) c.unsupported("dtype " + dtype_name(t) + " is not supported");
    if (!c.node().has_attr("equation")) c.fail("missing attribute 'equation'");
    c.set_output(0, t, plan_einsum(c.node(), input_shapes(c)).out_shape);
  };
  d.eval = [](EvalContext& c) {
    std::vector<Shape> shapes;
    for (size_t i = 0; i < c.num_inputs(); ++i) shapes.push_back(c.input(i).shape());
    EinsumPlan plan = plan_einsum(c.node(), shapes);
    DType t = c.input(0).dtype();
    if (is_float(t)) {
      std::vector<std::vector<double>> ops;
      for (size_t i = 0; i < c.num_inputs(); ++i) ops.push_back(c.input(i).to_doubles());
      auto y = run_einsum<double>(plan, ops, shapes, 1.0, [](double a, double b) { return a * b; },
                                  [](double a, double b) { return a + b; });
      c.set_output(0, Tensor::from_doubles(t, plan.out_shape, y));
    } else {
      std::vector<std::vector<int64_t>> ops;
      for (size_t i = 0; i < c.num_inputs(); ++i) ops.push_back(c.input(i).to_ints());
      auto y = run_einsum<int64_t>(plan, ops, shapes, 1, wrapping_mul, wrapping_add);
      c.set_output(0, Tensor::from_ints(t, plan.out_shape, y));
    }
  };
  // Each visited label combination costs (operands - 1) multiplies and one add.
  d.flops = [](const NodeShapes& s) {
    EinsumPlan plan = plan_einsum(s.node, s.in);
    double combos = 1.0;
    for (int64_t e : plan.extent)
      if (e >= 0) combos *= static_cast<double>(e);
    return combos * static_cast<double>(s.in.size());
  };
  return d;
}

}  // namespace

void register_einsum_op(OpRegistry& r) { r.add(einsum_op()); }

}  // namespace kiln::linalg
