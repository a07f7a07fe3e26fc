// Linear algebra: MatMul and Gemm here, plus the family's shared helpers and its entry point. Einsum,
// Attention/RotaryEmbedding and the quantized ops live in linalg_einsum.cc, linalg_attention.cc and
// linalg_quant.cc.
#include <cmath>
#include <limits>

#include "frontend/ir/narrow_types.h"
#include "frontend/ops/linalg_internal.h"
#include "frontend/ops/axes_and_broadcast.h"

namespace kiln {
namespace linalg {

MatMulDims matmul_dims(const Node& node, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty())
    throw Error(node.label() + ": matmul operands must have rank >= 1, got " + shape_str(a) + " and " + shape_str(b));
  MatMulDims d;
  size_t ra = a.size(), rb = b.size();
  int64_t kb;
  if (ra == 1) {
    d.k = a[0];
  } else {
    d.m = a[ra - 2];
    d.k = a[ra - 1];
    d.a_batch.assign(a.begin(), a.end() - 2);
  }
  if (rb == 1) {
    kb = b[0];
  } else {
    kb = b[rb - 2];
    d.n = b[rb - 1];
    d.b_batch.assign(b.begin(), b.end() - 2);
  }
  if (d.k != kb)
    throw Error(node.label() + ": cannot multiply " + shape_str(a) + " by " + shape_str(b) + " (inner extents " +
                std::to_string(d.k) + " and " + std::to_string(kb) + " differ)");
  auto batch = broadcast(d.a_batch, d.b_batch);
  if (!batch)
    throw Error(node.label() + ": batch axes of " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
  d.batch = *batch;
  d.out = d.batch;
  if (ra > 1) d.out.push_back(d.m);
  if (rb > 1) d.out.push_back(d.n);
  return d;
}

namespace {
template <typename T, typename MulAdd>
std::vector<T> batched_matmul_impl(const MatMulDims& d, const std::vector<T>& a, const std::vector<T>& b,
                                   MulAdd mul_add) {
  std::vector<int64_t> a_of = broadcast_index_map(d.batch, d.a_batch);
  std::vector<int64_t> b_of = broadcast_index_map(d.batch, d.b_batch);
  const int64_t m = d.m, k = d.k, n = d.n;
  std::vector<T> out(static_cast<size_t>(d.batch_count() * m * n), T{});
  for (int64_t p = 0; p < d.batch_count(); ++p) {
    const T* ap = a.data() + a_of[p] * m * k;
    const T* bp = b.data() + b_of[p] * k * n;
    T* op = out.data() + p * m * n;
    // i-k-j order walks B and the output row contiguously.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < k; ++kk) {
        T av = ap[i * k + kk];
        const T* brow = bp + kk * n;
        T* orow = op + i * n;
        for (int64_t j = 0; j < n; ++j) orow[j] = mul_add(orow[j], av, brow[j]);
      }
  }
  return out;
}
}  // namespace

std::vector<double> batched_matmul(const MatMulDims& d, const std::vector<double>& a, const std::vector<double>& b) {
  return batched_matmul_impl(d, a, b, [](double acc, double x, double y) { return acc + x * y; });
}

std::vector<int64_t> batched_matmul(const MatMulDims& d, const std::vector<int64_t>& a,
                                    const std::vector<int64_t>& b) {
  return batched_matmul_impl(d, a, b,
                             [](int64_t acc, int64_t x, int64_t y) { return wrapping_add(acc, wrapping_mul(x, y)); });
}

double round_half_to_even(double v) {
  if (!std::isfinite(v)) return v;
  double r = std::round(v);  // halves away from zero
  if (std::fabs(v - std::trunc(v)) == 0.5) r = 2.0 * std::round(v / 2.0);
  return r;
}

double requantize_float32(int64_t acc, float multiplier, double zero_point) {
  const float product = static_cast<float>(acc) * multiplier;  // float32, as MLAS computes it
  return round_half_to_even(static_cast<double>(product)) + zero_point;
}

double integer_min(DType t) {
  switch (t) {
    case DType::Int8: return -128.0;
    case DType::Int16: return -32768.0;
    case DType::Int32: return -2147483648.0;
    case DType::Int64: return -9223372036854775808.0;
    case DType::Int4: case DType::Int2: return static_cast<double>(narrow_int_min(t));
    default: return 0.0;  // unsigned and bool
  }
}

double integer_max(DType t) {
  switch (t) {
    case DType::Bool: return 1.0;
    case DType::UInt8: return 255.0;
    case DType::Int8: return 127.0;
    case DType::UInt16: return 65535.0;
    case DType::Int16: return 32767.0;
    case DType::UInt32: return 4294967295.0;
    case DType::Int32: return 2147483647.0;
    case DType::UInt64: return 18446744073709551615.0;
    case DType::Int4: case DType::UInt4: case DType::Int2: case DType::UInt2:
      return static_cast<double>(narrow_int_max(t));
    default: return 9223372036854775807.0;
  }
}

DType promoted_float_dtype(DType a, DType b) {
  if (a == DType::Float64 || b == DType::Float64 || !is_float(a) || !is_float(b)) return DType::Float64;
  if (a == b) return a;
  return DType::Float32;
}

DType dtype_attr(const Node& node, const std::string& attr, int64_t value) {
  DType t = dtype_from_int(static_cast<int32_t>(value));
  if (!is_supported(t))
    throw Unsupported(node.label() + ": attribute '" + attr + "' names dtype " + dtype_name(t) +
                      ", which kiln does not support");
  return t;
}

namespace {

bool matmul_dtype_ok(DType t) { return is_float(t) || is_integer(t); }

void matmul_infer(InferContext& c) {
  c.require_input(0, "A");
  c.require_input(1, "B");
  DType t = same_dtype_inputs(c);
  if (!matmul_dtype_ok(t)) c.unsupported("dtype " + dtype_name(t) + " is not supported");
  c.set_output(0, t, matmul_dims(c.node(), c.shape(0), c.shape(1)).out);
}

void matmul_eval(EvalContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  MatMulDims d = matmul_dims(c.node(), a.shape(), b.shape());
  if (a.is_float_dtype()) {
    auto y = batched_matmul(d, a.to_doubles(), b.to_doubles());
    c.set_output(0, Tensor::from_doubles(a.dtype(), d.out, y));
  } else {
    auto y = batched_matmul(d, a.to_ints(), b.to_ints());
    c.set_output(0, Tensor::from_ints(a.dtype(), d.out, y));
  }
}

double matmul_flops(const NodeShapes& s) {
  MatMulDims d = matmul_dims(s.node, s.in.at(0), s.in.at(1));
  return 2.0 * static_cast<double>(d.batch_count()) * static_cast<double>(d.m * d.k * d.n);
}

OpDef matmul_op() {
  OpDef d;
  d.op_type = "MatMul";
  d.infer = matmul_infer;
  d.eval = matmul_eval;
  d.flops = matmul_flops;
  return d;
}

// Gemm: Y = alpha * op(A) * op(B) + beta * C, op = optional transpose, C broadcast to [M, N].
struct GemmDims {
  int64_t m, k, n;
};

GemmDims gemm_dims(const Node& node, const Shape& a, const Shape& b) {
  if (a.size() != 2 || b.size() != 2)
    throw Error(node.label() + ": A and B must be 2-D, got " + shape_str(a) + " and " + shape_str(b));
  bool trans_a = node.attr_int("transA", 0) != 0;
  bool trans_b = node.attr_int("transB", 0) != 0;
  GemmDims g;
  g.m = trans_a ? a[1] : a[0];
  g.k = trans_a ? a[0] : a[1];
  int64_t kb = trans_b ? b[1] : b[0];
  g.n = trans_b ? b[0] : b[1];
  if (g.k != kb)
    throw Error(node.label() + ": inner extents differ: op(A) is " + std::to_string(g.m) + "x" + std::to_string(g.k) +
                ", op(B) is " + std::to_string(kb) + "x" + std::to_string(g.n));
  return g;
}

void gemm_infer(InferContext& c) {
  c.require_input(0, "A");
  c.require_input(1, "B");
  DType t = same_dtype_inputs(c);
  if (!matmul_dtype_ok(t)) c.unsupported("dtype " + dtype_name(t) + " is not supported");
  GemmDims g = gemm_dims(c.node(), c.shape(0), c.shape(1));
  Shape out{g.m, g.n};
  if (c.has_input(2)) {
    const Shape& cs = c.shape(2);
    auto b = broadcast(cs, out);
    if (cs.size() > 2 || !b || *b != out)
      c.fail("C of shape " + shape_str(cs) + " does not broadcast to the result's shape " + shape_str(out));
  }
  c.set_output(0, t, out);
}

void gemm_eval(EvalContext& c) {
  const Node& node = c.node();
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  GemmDims g = gemm_dims(node, a.shape(), b.shape());
  bool trans_a = node.attr_int("transA", 0) != 0;
  bool trans_b = node.attr_int("transB", 0) != 0;
  double alpha = node.attr_float("alpha", 1.0);
  double beta = node.attr_float("beta", 1.0);
  Shape out_shape{g.m, g.n};
  std::vector<int64_t> c_of;
  if (c.has_input(2)) c_of = broadcast_index_map(out_shape, c.input(2).shape());
  Tensor y(a.dtype(), out_shape);
  // Integer operands keep exact int64 products; alpha and beta (floats) apply afterwards.
  bool integer = !a.is_float_dtype();
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double acc = 0.0;
      int64_t iacc = 0;
      for (int64_t kk = 0; kk < g.k; ++kk) {
        int64_t ai = trans_a ? kk * g.m + i : i * g.k + kk;
        int64_t bi = trans_b ? j * g.k + kk : kk * g.n + j;
        if (integer) iacc = wrapping_add(iacc, wrapping_mul(a.get_int(ai), b.get_int(bi)));
        else acc += a.get_double(ai) * b.get_double(bi);
      }
      int64_t o = i * g.n + j;
      if (integer && alpha == 1.0 && (c_of.empty() || beta == 1.0)) {
        if (!c_of.empty()) iacc = wrapping_add(iacc, c.input(2).get_int(c_of[o]));
        y.set_int(o, iacc);
        continue;
      }
      double v = alpha * (integer ? static_cast<double>(iacc) : acc);
      if (!c_of.empty()) v += beta * c.input(2).get_double(c_of[o]);
      y.set_double(o, v);
    }
  c.set_output(0, std::move(y));
}

double gemm_flops(const NodeShapes& s) {
  GemmDims g = gemm_dims(s.node, s.in.at(0), s.in.at(1));
  double mn = static_cast<double>(g.m * g.n);
  bool has_c = s.in.size() > 2 && !s.node.inputs[2].empty();
  return 2.0 * mn * static_cast<double>(g.k) + mn + (has_c ? 2.0 * mn : 0.0);
}

OpDef gemm_op() {
  OpDef d;
  d.op_type = "Gemm";
  d.infer = gemm_infer;
  d.eval = gemm_eval;
  d.flops = gemm_flops;
  return d;
}

}  // namespace
}  // namespace linalg

void register_linalg_ops(OpRegistry& r) {
  r.add(linalg::matmul_op());
  r.add(linalg::gemm_op());
  linalg::register_einsum_op(r);
  linalg::register_attention_ops(r);
  linalg::register_quant_ops(r);
}

}  // namespace kiln
