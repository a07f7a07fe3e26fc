#include "frontend/ir/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "frontend/ir/error.h"
#include "frontend/ir/narrow_types.h"

namespace kiln {

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) throw Error("tensor shape " + shape_str(shape_) + " has a negative extent");
  const int bits = dtype_bits(dtype_);
  if (bits == 0) throw Unsupported("dtype " + dtype_name(dtype_) + " is not supported");
  // A corrupt model can claim any shape: refuse absurd sizes before multiplying them out.
  long double bytes = static_cast<long double>(bits) / 8;
  for (int64_t d : shape_) bytes *= static_cast<long double>(d);
  if (bytes > static_cast<long double>(kMaxTensorBytes))
    throw Error("tensor of shape " + shape_str(shape_) + " (" + dtype_name(dtype_) + ") is too large");
  size_ = num_elements(shape_);
  bytes_.assign(static_cast<size_t>(storage_bytes(dtype_, size_)), std::byte{0});
}

Tensor Tensor::from_doubles(DType dtype, Shape shape, std::span<const double> values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.size_)
    throw Error("tensor of shape " + shape_str(t.shape_) + " given " + std::to_string(values.size()) + " values");
  for (int64_t i = 0; i < t.size_; ++i) t.set_double(i, values[i]);
  return t;
}

Tensor Tensor::from_ints(DType dtype, Shape shape, std::span<const int64_t> values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.size_)
    throw Error("tensor of shape " + shape_str(t.shape_) + " given " + std::to_string(values.size()) + " values");
  for (int64_t i = 0; i < t.size_; ++i) t.set_int(i, values[i]);
  return t;
}

namespace {
template <typename T>
T load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void store(std::byte* p, int64_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// Float-to-int conversion that saturates instead of invoking undefined behaviour.
int64_t saturate_to_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}
}  // namespace

double Tensor::get_double(int64_t i) const {
  const std::byte* p = bytes_.data();
  switch (dtype_) {
    case DType::Float32: return load<float>(p, i);
    case DType::Float64: return load<double>(p, i);
    case DType::Float16: return half_to_float(load<uint16_t>(p, i));
    case DType::BFloat16: return bfloat16_to_float(load<uint16_t>(p, i));
    case DType::UInt64: return static_cast<double>(load<uint64_t>(p, i));
    default:
      if (is_narrow(dtype_)) return narrow_decode(dtype_, load_code(p, dtype_, i));
      return static_cast<double>(get_int(i));
  }
}

int64_t Tensor::get_int(int64_t i) const {
  const std::byte* p = bytes_.data();
  switch (dtype_) {
    case DType::Bool: return load<uint8_t>(p, i) != 0;
    case DType::UInt8: return load<uint8_t>(p, i);
    case DType::Int8: return load<int8_t>(p, i);
    case DType::UInt16: return load<uint16_t>(p, i);
    case DType::Int16: return load<int16_t>(p, i);
    case DType::UInt32: return load<uint32_t>(p, i);
    case DType::Int32: return load<int32_t>(p, i);
    case DType::Int64: return load<int64_t>(p, i);
    case DType::UInt64: return static_cast<int64_t>(load<uint64_t>(p, i));
    default:
      if (is_narrow_int(dtype_)) return static_cast<int64_t>(narrow_decode(dtype_, load_code(p, dtype_, i)));
      return saturate_to_int64(get_double(i));
  }
}

void Tensor::set_double(int64_t i, double v) {
  std::byte* p = bytes_.data();
  switch (dtype_) {
    case DType::Float32: store<float>(p, i, static_cast<float>(v)); return;
    case DType::Float64: store<double>(p, i, v); return;
    case DType::Float16: store<uint16_t>(p, i, float_to_half(static_cast<float>(v))); return;
    case DType::BFloat16: store<uint16_t>(p, i, float_to_bfloat16(static_cast<float>(v))); return;
    case DType::Bool: store<uint8_t>(p, i, v != 0.0 ? 1 : 0); return;
    case DType::UInt64:
      store<uint64_t>(p, i, v <= 0 || std::isnan(v) ? 0 : v >= 1.8446744073709552e19 ? ~0ull : static_cast<uint64_t>(v));
      return;
    default:
      if (is_narrow_float(dtype_)) return store_code(p, dtype_, i, narrow_float_encode(dtype_, v, /*saturate=*/true));
      set_int(i, saturate_to_int64(v));
      return;
  }
}

void Tensor::set_int(int64_t i, int64_t v) {
  std::byte* p = bytes_.data();
  switch (dtype_) {
    case DType::Bool: store<uint8_t>(p, i, v != 0 ? 1 : 0); return;
    case DType::UInt8: store<uint8_t>(p, i, static_cast<uint8_t>(v)); return;
    case DType::Int8: store<int8_t>(p, i, static_cast<int8_t>(v)); return;
    case DType::UInt16: store<uint16_t>(p, i, static_cast<uint16_t>(v)); return;
    case DType::Int16: store<int16_t>(p, i, static_cast<int16_t>(v)); return;
    case DType::UInt32: store<uint32_t>(p, i, static_cast<uint32_t>(v)); return;
    case DType::Int32: store<int32_t>(p, i, static_cast<int32_t>(v)); return;
    case DType::Int64: store<int64_t>(p, i, v); return;
    case DType::UInt64: store<uint64_t>(p, i, static_cast<uint64_t>(v)); return;
    default:
      if (is_narrow_int(dtype_)) return store_code(p, dtype_, i, narrow_int_wrap(dtype_, v));
      set_double(i, static_cast<double>(v));
      return;
  }
}

uint32_t Tensor::code(int64_t i) const { return load_code(bytes_.data(), dtype_, i); }

void Tensor::set_code(int64_t i, uint32_t code) { store_code(bytes_.data(), dtype_, i, code); }

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> out(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) out[i] = get_double(i);
  return out;
}

std::vector<int64_t> Tensor::to_ints() const {
  std::vector<int64_t> out(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) out[i] = get_int(i);
  return out;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (num_elements(shape) != size_)
    throw Error("cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::leading(int64_t axis, int64_t count) const {
  if (axis < 0 || axis >= rank()) throw Error("axis " + std::to_string(axis) + " of a tensor of shape " + shape_str(shape_));
  const auto a = static_cast<size_t>(axis);
  const int64_t extent = shape_[a];
  if (count < 0 || count > extent)
    throw Error("a count of " + std::to_string(count) + " for " + std::to_string(extent) + " entries along axis " + std::to_string(axis));
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < a; ++i) outer *= shape_[i];
  for (size_t i = a + 1; i < shape_.size(); ++i) inner *= shape_[i];
  Shape shape = shape_;
  shape[a] = count;
  Tensor out(dtype_, shape);
  if (dtype_bits(dtype_) < 8) {  // packed: element by element
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < count * inner; ++j) out.set_code(o * count * inner + j, code(o * extent * inner + j));
    return out;
  }
  const int64_t width = static_cast<int64_t>(dtype_size(dtype_)) * inner;  // bytes
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(data() + o * extent * width, count * width, out.data() + o * count * width);
  return out;
}

}  // namespace kiln
