#include "frontend/ir/tensor.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"

namespace kiln {
namespace {

TEST(Tensor, StoresInTheDtypesPrecision) {
  Tensor t(DType::Float32, {2});
  t.set_double(0, 0.1);
  EXPECT_EQ(t.get_double(0), static_cast<double>(0.1f));
  Tensor h(DType::Float16, {1});
  h.set_double(0, 1.0 + 1.0 / 4096);  // not representable in half: rounds to 1
  EXPECT_EQ(h.get_double(0), 1.0);
  EXPECT_EQ(h.byte_size(), 2u);
}

TEST(Tensor, IntegersAreExactAndWrap) {
  Tensor t(DType::Int64, {1});
  t.set_int(0, (int64_t{1} << 62) + 1);
  EXPECT_EQ(t.get_int(0), (int64_t{1} << 62) + 1);
  Tensor u(DType::UInt8, {1});
  u.set_int(0, -1);
  EXPECT_EQ(u.get_int(0), 255);
  Tensor f2i(DType::Int32, {1});
  f2i.set_double(0, -2.7);  // truncates toward zero, as ONNX Cast does
  EXPECT_EQ(f2i.get_int(0), -2);
}

TEST(Tensor, ReshapeKeepsBytes) {
  std::vector<int64_t> v = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_ints(DType::Int32, {2, 3}, v);
  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_ints(), v);
  EXPECT_THROW(t.reshaped({4}), Error);
}

TEST(Tensor, RejectsWrongValueCountsAndDtypes) {
  std::vector<double> v = {1, 2, 3};
  EXPECT_THROW(Tensor::from_doubles(DType::Float32, {2, 2}, v), Error);
  EXPECT_THROW(Tensor(DType::String, {1}), Unsupported);
  EXPECT_THROW(Tensor(DType::Float32, {-1}), Error);
}

TEST(Shape, Helpers) {
  EXPECT_EQ(shape_str({1, 3, 224, 224}), "1x3x224x224");
  EXPECT_EQ(shape_str({}), "scalar");
  EXPECT_EQ(strides_of({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(num_elements({2, 0, 4}), 0);
}

}  // namespace
}  // namespace kiln
