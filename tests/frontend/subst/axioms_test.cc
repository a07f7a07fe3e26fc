// TASO's operator properties (frontend/subst/axioms.h): every axiom holds on every one of its shape
// cases (under a second here), and the check catches false ones.
#include "frontend/subst/axioms.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <stdexcept>

#include "frontend/subst/term_graph.h"

namespace kiln::subst {
namespace {

const Axiom& named(const std::string& name) {
  for (const Axiom& a : axioms())
    if (a.name == name) return a;
  throw std::out_of_range("no axiom named " + name);
}

TEST(Axioms, EveryAxiomHoldsOnEveryShapeCase) {
  std::set<std::string> names;
  for (const Axiom& a : axioms()) {
    EXPECT_TRUE(names.insert(a.name).second) << "two axioms named " << a.name;
    const AxiomCheck r = check_axiom(a);
    EXPECT_GT(r.cases, 0) << a.name;
    EXPECT_EQ(r.failed, 0) << a.name << ": " << to_string(a.lhs) << " = " << to_string(a.rhs) << ": " << r.first_failure;
  }
  EXPECT_GE(axioms().size(), 40u);
}

TEST(Axioms, AFalseAxiomIsCaught) {
  const TermRef x = leaf("x"), y = leaf("y"), w = leaf("w");
  // matmul does not commute, and conv is not linear once relu is fused; both caught on the first
  // square cases.
  Axiom commutes{"matmul commutes", matmul(x, y), matmul(y, x), [](uint64_t seed) {
                   std::mt19937_64 rng(seed);
                   std::vector<LeafValues> cases;
                   for (int64_t n = 1; n <= 4; ++n) {
                     std::vector<double> a, b;
                     for (int64_t i = 0; i < n * n; ++i) a.push_back(static_cast<double>(rng() % 7) - 3), b.push_back(static_cast<double>(rng() % 7) - 3);
                     cases.push_back({{"x", Tensor::from_doubles(DType::Float64, {n, n}, a)}, {"y", Tensor::from_doubles(DType::Float64, {n, n}, b)}});
                   }
                   return cases;
                 }};
  const AxiomCheck r = check_axiom(commutes);
  Axiom fused_relu_linear{"conv with relu is linear", conv(ewadd(x, y), w, true, true),
                          ewadd(conv(x, w, true, true), conv(y, w, true, true)), named("conv is linear in its input").cases};
  EXPECT_GT(check_axiom(fused_relu_linear, 1, 24).failed, 0);
  EXPECT_EQ(r.cases, 4);
  EXPECT_GE(r.failed, 2);  // a 1x1 product commutes; larger random ones do not
  EXPECT_NE(r.first_failure.find("relative difference"), std::string::npos) << r.first_failure;
  EXPECT_EQ(to_string(conv(x, w, false, true)), "conv[valid, relu](x, w)");
  EXPECT_EQ(to_string(split0(1, 2, concat(1, x, y))), "split0[axis 1, at 2](concat[axis 1](x, y))");
}

}  // namespace
}  // namespace kiln::subst
