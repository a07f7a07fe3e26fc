/// \file Dense tensors: constant initializers in the graph and values in the reference interpreter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frontend/ir/dtype.h"

namespace kiln {

/// The largest tensor kiln will allocate (64 GiB): beyond it a shape is taken to be corrupt.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 36;

/// Static shape: one extent per axis, all known. Rank 0 is a scalar.
using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& s);
std::string shape_str(const Shape& s);  // "1x3x224x224", "scalar" for rank 0
/// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);

/// A dense row-major tensor that owns its bytes in the dtype's native little-endian layout (bool is one
/// byte, float16/bfloat16 are their 16-bit patterns, the narrow types their codes, packed as
/// narrow_types.h says). One type serves both constant weights in the
/// graph (kept compact, as the model stores them) and the reference interpreter, which reads and writes
/// elements as double or int64 through the accessors below so every kernel is written once.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled

  static Tensor from_doubles(DType dtype, Shape shape, std::span<const double> values);
  static Tensor from_ints(DType dtype, Shape shape, std::span<const int64_t> values);
  static Tensor scalar_int(DType dtype, int64_t v) { return from_ints(dtype, {}, std::span(&v, 1)); }
  static Tensor scalar_double(DType dtype, double v) { return from_doubles(dtype, {}, std::span(&v, 1)); }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const { return size_; }
  size_t byte_size() const { return bytes_.size(); }
  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }

  /// Element i read as a number. Floats read exactly; integers convert to double for get_double.
  double get_double(int64_t i) const;
  int64_t get_int(int64_t i) const;
  /// Stores a value, rounding floats to the dtype (float16 round-to-nearest-even) and wrapping ints.
  void set_double(int64_t i, double v);
  void set_int(int64_t i, int64_t v);
  /// The narrow types' codes (narrow_types.h): element i's bit pattern, and its replacement.
  uint32_t code(int64_t i) const;
  void set_code(int64_t i, uint32_t code);
  /// Writes whichever is natural for the dtype: doubles for float dtypes, ints otherwise.
  bool is_float_dtype() const { return is_float(dtype_); }

  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_ints() const;

  /// Same bytes, new shape (the element count must match).
  Tensor reshaped(Shape shape) const;
  /// The first `count` entries along `axis` (a run-time-sized output's result); throws Error when
  /// `count` is negative or past the extent.
  Tensor leading(int64_t axis, int64_t count) const;

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  int64_t size_ = 0;
  std::vector<std::byte> bytes_;
};

}  // namespace kiln
