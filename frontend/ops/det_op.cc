// Det: the determinant of each square matrix in a batch, by Gaussian elimination in double.
#include <cmath>
#include <utility>

#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

// Determinant by Gaussian elimination with partial pivoting, in double.
double determinant(std::vector<double> a, int64_t n) {
  double det = 1.0;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    if (a[pivot * n + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
      det = -det;
    }
    double p = a[col * n + col];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      double f = a[r * n + col] / p;
      if (f == 0.0) continue;
      for (int64_t k = col + 1; k < n; ++k) a[r * n + k] -= f * a[col * n + k];
    }
  }
  return det;
}

OpDef det_op() {
  OpDef d;
  d.op_type = "Det";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    require_float_input(c, 0, "X");
    const Shape& s = c.shape(0);
    if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
      c.fail("X must be [*, M, M] (square matrices), got " + shape_str(s));
    c.set_output(0, c.dtype(0), Shape(s.begin(), s.end() - 2));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t n = x.shape().back();
    Tensor y(x.dtype(), Shape(x.shape().begin(), x.shape().end() - 2));
    std::vector<double> m(static_cast<size_t>(n * n));
    for (int64_t b = 0; b < y.size(); ++b) {
      for (int64_t i = 0; i < n * n; ++i) m[i] = x.get_double(b * n * n + i);
      y.set_double(b, determinant(m, n));
    }
    c.set_output(0, std::move(y));
  };
  // Elimination: about 2 M^3 / 3 FLOPs per matrix.
  d.flops = [](const NodeShapes& s) {
    double m = static_cast<double>(s.in[0].back());
    return static_cast<double>(num_elements(s.out[0])) * 2.0 * m * m * m / 3.0;
  };
  return d;
}

}  // namespace

void register_det_op(OpRegistry& r) {
  r.add(det_op());
}

}  // namespace kiln::misc
