#include "frontend/subst/axioms.h"

#include <cmath>
#include <random>

#include "frontend/ir/error.h"
#include "frontend/subst/term_graph.h"

namespace kiln::subst {
namespace {

constexpr int64_t kMaxExtent = 4;  // every shape case up to 4x4x4x4

// Random integers in [-3, 3] as float64: sums and products of a few stay exact.
Tensor ints(const Shape& shape, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-3, 3);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) x = d(rng);
  return Tensor::from_doubles(DType::Float64, shape, v);
}

// Calls fn with every tuple of `count` extents in 1..kMaxExtent.
void for_each_extents(size_t count, const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> d(count, 1);
  for (;;) {
    fn(d);
    size_t i = 0;
    while (i < count && ++d[i] > kMaxExtent) d[i++] = 1;
    if (i == count) return;
  }
}

// Every shape of rank 1 to 4 with extents 1..4.
std::vector<Shape> all_shapes() {
  std::vector<Shape> out;
  for (size_t rank = 1; rank <= 4; ++rank) for_each_extents(rank, [&](const std::vector<int64_t>& d) { out.push_back(d); });
  return out;
}

using CaseFn = std::function<std::vector<LeafValues>(uint64_t)>;

// Leaves of one shape each (every shape up to 4x4x4x4), with scalar leaves `scalars`.
CaseFn same_shape(std::vector<std::string> names, std::vector<std::string> scalars = {}) {
  return [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<LeafValues> out;
    for (const Shape& s : all_shapes()) {
      LeafValues v;
      for (const std::string& n : names) v[n] = ints(s, rng);
      for (const std::string& n : scalars) v[n] = ints({}, rng);
      if (std::count(names.begin(), names.end(), "ones")) v["ones"] = Tensor::from_doubles(DType::Float64, s, std::vector<double>(static_cast<size_t>(num_elements(s)), 1.0));
      out.push_back(std::move(v));
    }
    return out;
  };
}

// Cases built from `count` extents (each 1..4) by `make`.
CaseFn extents(size_t count, std::function<LeafValues(const std::vector<int64_t>&, std::mt19937_64&)> make) {
  return [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<LeafValues> out;
    for_each_extents(count, [&](const std::vector<int64_t>& d) { out.push_back(make(d, rng)); });
    return out;
  };
}

// Tensors that differ only along `axis`, for every rank that has it and every pair of extents there.
CaseFn concat_pairs(std::vector<std::string> names, bool matrices = false, size_t axis = 0) {
  return [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<LeafValues> out;
    for (const Shape& s : all_shapes()) {
      if ((matrices && s.size() != 2) || s.size() <= axis) continue;
      for (int64_t extent = 1; extent <= kMaxExtent; ++extent) {
        Shape t = s;
        t[axis] = extent;
        LeafValues v;
        v[names[0]] = ints(s, rng);
        v[names[1]] = ints(t, rng);
        for (size_t i = 2; i < names.size(); ++i) v[names[i]] = ints(i % 2 ? t : s, rng);
        out.push_back(std::move(v));
      }
    }
    return out;
  };
}

Tensor identity_matrix(int64_t n) {
  Tensor t(DType::Float64, {n, n});
  for (int64_t i = 0; i < n; ++i) t.set_double(i * n + i, 1.0);
  return t;
}

// [c, c, 3, 3] with 1 at the centre of each channel's own tap: the identity convolution.
Tensor identity_kernel(int64_t c) {
  Tensor t(DType::Float64, {c, c, 3, 3});
  for (int64_t i = 0; i < c; ++i) t.set_double(((i * c + i) * 3 + 1) * 3 + 1, 1.0);
  return t;
}

std::vector<Axiom> make_axioms() {
  const TermRef x = leaf("x"), y = leaf("y"), z = leaf("z"), w = leaf("w"), v = leaf("v"), s = leaf("s"), t = leaf("t");
  std::vector<Axiom> a;
  auto add = [&](std::string name, TermRef lhs, TermRef rhs, CaseFn cases) { a.push_back({std::move(name), lhs, rhs, std::move(cases)}); };

  // Element-wise operators, on every shape.
  add("ewadd is commutative", ewadd(x, y), ewadd(y, x), same_shape({"x", "y"}));
  add("ewadd is associative", ewadd(x, ewadd(y, z)), ewadd(ewadd(x, y), z), same_shape({"x", "y", "z"}));
  add("ewmul is commutative", ewmul(x, y), ewmul(y, x), same_shape({"x", "y"}));
  add("ewmul is associative", ewmul(x, ewmul(y, z)), ewmul(ewmul(x, y), z), same_shape({"x", "y", "z"}));
  add("ewmul distributes over ewadd", ewmul(ewadd(x, y), z), ewadd(ewmul(x, z), ewmul(y, z)), same_shape({"x", "y", "z"}));
  add("smul is associative", smul(smul(x, s), t), smul(x, ewmul(s, t)), same_shape({"x"}, {"s", "t"}));
  add("smul distributes over ewadd", smul(ewadd(x, y), s), ewadd(smul(x, s), smul(y, s)), same_shape({"x", "y"}, {"s"}));
  add("smul moves into ewmul", smul(ewmul(x, y), s), ewmul(x, smul(y, s)), same_shape({"x", "y"}, {"s"}));
  add("relu is idempotent", relu(relu(x)), relu(x), same_shape({"x"}));
  add("ewmul by ones is the identity", ewmul(x, leaf("ones")), x, same_shape({"x", "ones"}));

  // Transpose, on matrices.
  auto matrices = [](std::vector<std::string> names, std::vector<std::string> scalars = {}) {
    return extents(2, [=](const std::vector<int64_t>& d, std::mt19937_64& rng) {
      LeafValues l;
      for (const std::string& n : names) l[n] = ints({d[0], d[1]}, rng);
      for (const std::string& n : scalars) l[n] = ints({}, rng);
      return l;
    });
  };
  add("transpose is an involution", transpose(transpose(x)), x, matrices({"x"}));
  add("transpose distributes over ewadd", transpose(ewadd(x, y)), ewadd(transpose(x), transpose(y)), matrices({"x", "y"}));
  add("transpose distributes over ewmul", transpose(ewmul(x, y)), ewmul(transpose(x), transpose(y)), matrices({"x", "y"}));
  add("transpose commutes with smul", smul(transpose(x), s), transpose(smul(x, s)), matrices({"x"}, {"s"}));
  add("transpose commutes with relu", relu(transpose(x)), transpose(relu(x)), matrices({"x"}));

  // Matmul: x [m, k], y [k, n], z [n, p] (and their variants), every extent 1..4.
  auto mm = [](std::function<LeafValues(int64_t, int64_t, int64_t, int64_t, std::mt19937_64&)> make) {
    return extents(4, [=](const std::vector<int64_t>& d, std::mt19937_64& rng) { return make(d[0], d[1], d[2], d[3], rng); });
  };
  add("matmul is associative", matmul(x, matmul(y, z)), matmul(matmul(x, y), z),
      mm([](int64_t m, int64_t k, int64_t n, int64_t p, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({k, n}, r)}, {"z", ints({n, p}, r)}};
      }));
  add("matmul is linear in its first argument", matmul(ewadd(x, y), z), ewadd(matmul(x, z), matmul(y, z)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({m, k}, r)}, {"z", ints({k, n}, r)}};
      }));
  add("matmul is linear in its second argument", matmul(x, ewadd(y, z)), ewadd(matmul(x, y), matmul(x, z)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({k, n}, r)}, {"z", ints({k, n}, r)}};
      }));
  add("smul moves into matmul", smul(matmul(x, y), s), matmul(x, smul(y, s)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({k, n}, r)}, {"s", ints({}, r)}};
      }));
  add("transpose of matmul", transpose(matmul(x, y)), matmul(transpose(y), transpose(x)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({k, n}, r)}};
      }));
  add("matmul by I_matmul is the identity", matmul(x, leaf("I_matmul")), x,
      mm([](int64_t m, int64_t k, int64_t, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"I_matmul", identity_matrix(k)}};
      }));
  add("matmul distributes over concat on the right", matmul(x, concat(1, y, z)), concat(1, matmul(x, y), matmul(x, z)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t p, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({k, n}, r)}, {"z", ints({k, p}, r)}};
      }));
  add("matmul distributes over concat on the left", matmul(concat(0, x, y), z), concat(0, matmul(x, z), matmul(y, z)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t p, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({p, k}, r)}, {"z", ints({k, n}, r)}};
      }));
  add("a bias add of concatenated columns is a concat of bias adds", biasadd(concat(1, x, y), concat(0, w, z)),
      concat(1, biasadd(x, w), biasadd(y, z)),
      mm([](int64_t m, int64_t n, int64_t p, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, n}, r)}, {"y", ints({m, p}, r)}, {"w", ints({n}, r)}, {"z", ints({p}, r)}};
      }));
  add("matmul of concats along the inner axis", matmul(concat(1, x, y), concat(0, z, w)), ewadd(matmul(x, z), matmul(y, w)),
      mm([](int64_t m, int64_t k, int64_t n, int64_t p, std::mt19937_64& r) {
        return LeafValues{{"x", ints({m, k}, r)}, {"y", ints({m, p}, r)}, {"z", ints({k, n}, r)}, {"w", ints({p, n}, r)}};
      }));

  // Convolutions: x [n, c, h, h] (n 1 or 2), kernels [k, c, 3, 3], every extent 1..4.
  auto cv = [](std::function<LeafValues(int64_t, int64_t, int64_t, int64_t, std::mt19937_64&)> make) {
    return extents(4, [=](const std::vector<int64_t>& d, std::mt19937_64& rng) {
      return make(1 + (d[0] - 1) % 2, d[1], d[2], d[3], rng);
    });
  };
  add("conv is linear in its input", conv(ewadd(x, y), w), ewadd(conv(x, w), conv(y, w)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"y", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}};
      }));
  add("conv is linear in its kernel", conv(x, ewadd(w, v)), ewadd(conv(x, w), conv(x, v)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}, {"v", ints({k, c, 3, 3}, r)}};
      }));
  add("valid conv is linear in its input", conv(ewadd(x, y), w, false), ewadd(conv(x, w, false), conv(y, w, false)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h + 2, h + 2}, r)}, {"y", ints({n, c, h + 2, h + 2}, r)}, {"w", ints({k, c, 3, 3}, r)}};
      }));
  add("smul moves into conv's kernel", smul(conv(x, w), s), conv(x, smul(w, s)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}, {"s", ints({}, r)}};
      }));
  add("smul moves out of conv's input", conv(smul(x, s), w), smul(conv(x, w), s),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}, {"s", ints({}, r)}};
      }));
  add("enlarge commutes with smul", enlarge(smul(w, s), 1), smul(enlarge(w, 1), s),
      cv([](int64_t, int64_t c, int64_t, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"w", ints({k, c, 1, 1}, r)}, {"s", ints({}, r)}};
      }));
  add("conv with relu is relu of conv", conv(x, w, true, true), relu(conv(x, w)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}};
      }));
  add("enlarging a 1x1 kernel keeps a same conv", conv(x, w), conv(x, enlarge(w, 1)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 1, 1}, r)}};
      }));
  add("conv by I_conv is the identity", conv(x, leaf("I_conv")), x,
      cv([](int64_t n, int64_t c, int64_t h, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"I_conv", identity_kernel(c)}};
      }));
  add("conv by concatenated kernels is a concat of convs", conv(x, concat(0, w, v)), concat(1, conv(x, w), conv(x, v)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}, {"v", ints({1 + k % 3, c, 3, 3}, r)}};
      }));
  add("relu conv by concatenated kernels is a concat of them", conv(x, concat(0, w, v), true, true),
      concat(1, conv(x, w, true, true), conv(x, v, true, true)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}, {"v", ints({1 + k % 3, c, 3, 3}, r)}};
      }));
  // With a bias (b, c: one value per kernel), as every conv with a folded batch norm has.
  const TermRef b = leaf("b"), c = leaf("c");
  auto biased_pair = [](int64_t n, int64_t ch, int64_t h, int64_t k, std::mt19937_64& r) {
    return LeafValues{{"x", ints({n, ch, h, h}, r)}, {"w", ints({k, ch, 3, 3}, r)}, {"v", ints({1 + k % 3, ch, 3, 3}, r)},
                      {"b", ints({k}, r)}, {"c", ints({1 + k % 3}, r)}};
  };
  for (const bool fused_relu : {false, true})
    add(std::string(fused_relu ? "relu " : "") + "conv by concatenated kernels and biases is a concat of them",
        conv_bias(x, concat(0, w, v), concat(0, b, c), true, fused_relu),
        concat(1, conv_bias(x, w, b, true, fused_relu), conv_bias(x, v, c, true, fused_relu)), cv(biased_pair));
  // Two biased convs of one input whose outputs are added (RepVGG's and ACNet's training-time
  // branches): conv is linear in its kernel, and the biases add.
  add("biased convs of one input add as one conv by the summed kernels and biases",
      ewadd(conv_bias(x, w, b), conv_bias(x, v, c)), conv_bias(x, ewadd(w, v), ewadd(b, c)),
      cv([](int64_t n, int64_t ch, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, ch, h, h}, r)}, {"w", ints({k, ch, 3, 3}, r)}, {"v", ints({k, ch, 3, 3}, r)},
                          {"b", ints({k}, r)}, {"c", ints({k}, r)}};
      }));
  add("conv with a bias and relu is relu of it", conv_bias(x, w, b, true, true), relu(conv_bias(x, w, b)),
      cv([](int64_t n, int64_t ch, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, ch, h, h}, r)}, {"w", ints({k, ch, 3, 3}, r)}, {"b", ints({k}, r)}};
      }));
  add("enlarging a 1x1 kernel keeps a same conv with a bias", conv_bias(x, w, b), conv_bias(x, enlarge(w, 1), b),
      cv([](int64_t n, int64_t ch, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, ch, h, h}, r)}, {"w", ints({k, ch, 1, 1}, r)}, {"b", ints({k}, r)}};
      }));
  // The same four facts for depthwise convs (kernels [c, 1, 3, 3], MobileOne's training-time
  // branches) and for convs at stride 2 (each stage's first block), where "same" is PyTorch's
  // symmetric k / 2 padding: the 1x1 kernel enlarged to 3x3 is centred on the same input pixel.
  for (const int64_t group : {int64_t{1}, int64_t{0}})
    for (const int64_t stride : {int64_t{1}, int64_t{2}}) {
      if (group == 1 && stride == 1) continue;  // stated above
      const std::string kind = std::string(group == 0 ? "depthwise " : "") + (stride == 2 ? "stride-2 " : "");
      auto k = [=](const TermRef& in, const TermRef& kernel) { return conv(in, kernel, true, false, group, stride); };
      auto kb = [=](const TermRef& in, const TermRef& kernel, const TermRef& bias) {
        return conv_bias(in, kernel, bias, true, false, group, stride);
      };
      // x [n, c, h, h]; kernels [k, c, e, e] or, depthwise, [c, 1, e, e]; biases one per filter.
      auto kernels = [=](int64_t extent, bool biases) {
        return cv([=](int64_t n, int64_t ch, int64_t h, int64_t kk, std::mt19937_64& r) {
          const Shape ws = group == 0 ? Shape{ch, 1, extent, extent} : Shape{kk, ch, extent, extent};
          LeafValues l{{"x", ints({n, ch, h, h}, r)}, {"w", ints(ws, r)}, {"v", ints(ws, r)}};
          if (biases) {
            l["b"] = ints({ws[0]}, r);
            l["c"] = ints({ws[0]}, r);
          }
          return l;
        });
      };
      add(kind + "conv is linear in its kernel", k(x, ewadd(w, v)), ewadd(k(x, w), k(x, v)), kernels(3, false));
      add(kind + "biased convs of one input add as one conv by the summed kernels and biases",
          ewadd(kb(x, w, b), kb(x, v, c)), kb(x, ewadd(w, v), ewadd(b, c)), kernels(3, true));
      add(kind + "enlarging a 1x1 kernel keeps a same conv", k(x, w), k(x, enlarge(w, 1)), kernels(1, false));
      add(kind + "enlarging a 1x1 kernel keeps a same conv with a bias", kb(x, w, b), kb(x, enlarge(w, 1), b), kernels(1, true));
    }
  add("conv of concatenated channels is a sum of convs", conv(concat(1, x, y), concat(1, w, v)), ewadd(conv(x, w), conv(y, v)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        const int64_t c2 = 1 + c % 3;
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"y", ints({n, c2, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)},
                          {"v", ints({k, c2, 3, 3}, r)}};
      }));
  add("conv distributes over a batch concat", conv(concat(0, x, y), w), concat(0, conv(x, w), conv(y, w)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"y", ints({3 - n, c, h, h}, r)}, {"w", ints({k, c, 3, 3}, r)}};
      }));

  // Pooling (3x3, stride 1, same).
  add("pool_avg is a depthwise conv by C_pool", pool_avg(x), conv(x, leaf("C_pool"), true, false, 0),
      cv([](int64_t n, int64_t c, int64_t h, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)},
                          {"C_pool", Tensor::from_doubles(DType::Float64, {c, 1, 3, 3}, std::vector<double>(static_cast<size_t>(9 * c), 1.0 / 9))}};
      }));
  add("pool_max distributes over a channel concat", pool_max(concat(1, x, y)), concat(1, pool_max(x), pool_max(y)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"y", ints({n, k, h, h}, r)}};
      }));
  add("pool_avg distributes over a channel concat", pool_avg(concat(1, x, y)), concat(1, pool_avg(x), pool_avg(y)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t k, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"y", ints({n, k, h, h}, r)}};
      }));
  add("smul moves out of pool_avg", pool_avg(smul(x, s)), smul(pool_avg(x), s),
      cv([](int64_t n, int64_t c, int64_t h, int64_t, std::mt19937_64& r) {
        return LeafValues{{"x", ints({n, c, h, h}, r)}, {"s", ints({}, r)}};
      }));
  add("relu commutes with pool_max", relu(pool_max(x)), pool_max(relu(x)),
      cv([](int64_t n, int64_t c, int64_t h, int64_t, std::mt19937_64& r) { return LeafValues{{"x", ints({n, c, h, h}, r)}}; }));

  // Concat and split along axis 0, every rank; x and y differ in extent there.
  add("split0 of a concat is its first part", split0(0, -1, concat(0, x, y)), x, concat_pairs({"x", "y"}));
  add("split1 of a concat is its second part", split1(0, -1, concat(0, x, y)), y, concat_pairs({"x", "y"}));
  add("split0 of a concat on axis 1 is its first part", split0(1, -1, concat(1, x, y)), x, concat_pairs({"x", "y"}, false, 1));
  add("split1 of a concat on axis 1 is its second part", split1(1, -1, concat(1, x, y)), y, concat_pairs({"x", "y"}, false, 1));
  add("relu distributes over concat", relu(concat(0, x, y)), concat(0, relu(x), relu(y)), concat_pairs({"x", "y"}));
  add("ewadd of concats is a concat of ewadds", ewadd(concat(0, x, z), concat(0, w, y)), concat(0, ewadd(x, w), ewadd(z, y)),
      concat_pairs({"x", "y", "w", "z"}));
  add("ewmul of concats is a concat of ewmuls", ewmul(concat(0, x, z), concat(0, w, y)), concat(0, ewmul(x, w), ewmul(z, y)),
      concat_pairs({"x", "y", "w", "z"}));
  add("transpose of a concat", transpose(concat(0, x, y)), concat(1, transpose(x), transpose(y)), concat_pairs({"x", "y"}, true));
  const TermRef xy = concat(0, x, y);
  add("a concat of a split's parts is the whole", concat(0, split0(0, -1, xy), split1(0, -1, xy)), xy, concat_pairs({"x", "y"}));
  return a;
}

}  // namespace

std::string axioms_hash() {
  uint64_t h = 1469598103934665603ull;
  for (const Axiom& a : axioms())
    for (char ch : a.name + ": " + to_string(a.lhs) + " = " + to_string(a.rhs) + "\n") h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = digits[h & 15];
  return out;
}

const std::vector<Axiom>& axioms() {
  static const std::vector<Axiom> all = make_axioms();
  return all;
}

AxiomCheck check_axiom(const Axiom& a, uint64_t seed, int64_t max_cases) {
  AxiomCheck r;
  const std::vector<LeafValues> cases = a.cases(seed);
  const auto count = static_cast<int64_t>(cases.size());
  const int64_t step = max_cases > 0 && count > max_cases ? (count + max_cases - 1) / max_cases : 1;
  for (int64_t c = 0; c < count; c += step) {
    const LeafValues& leaves = cases[static_cast<size_t>(c)];
    const std::vector<Tensor> out = evaluate({a.lhs, a.rhs}, leaves);
    ++r.cases;
    std::string why;
    if (out[0].shape() != out[1].shape()) {
      why = "shapes " + shape_str(out[0].shape()) + " and " + shape_str(out[1].shape());
    } else {
      double worst = 0;
      for (int64_t i = 0; i < out[0].size(); ++i) {
        const double l = out[0].get_double(i), rv = out[1].get_double(i);
        worst = std::max(worst, std::abs(l - rv) / std::max(1.0, std::abs(l)));
      }
      if (worst > 1e-12) why = "a relative difference of " + std::to_string(worst);
    }
    if (why.empty()) continue;
    if (r.failed++ == 0) {
      std::string shapes;
      for (const auto& [name, value] : leaves) shapes += (shapes.empty() ? "" : ", ") + name + " " + shape_str(value.shape());
      r.first_failure = shapes + ": " + why;
    }
  }
  return r;
}

}  // namespace kiln::subst
