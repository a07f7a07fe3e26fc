#include "frontend/onnx/tensor_proto.h"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "frontend/ir/error.h"
#include "frontend/ir/narrow_types.h"

namespace kiln {

namespace {

Shape proto_shape(const onnx::TensorProto& p, const std::string& context) {
  Shape s;
  for (int64_t d : p.dims()) {
    if (d < 0) throw Error(context + ": negative dimension " + std::to_string(d));
    s.push_back(d);
  }
  // Guard against absurd sizes before allocating (a corrupt file can claim any shape).
  long double n = 1;
  for (int64_t d : s) n *= static_cast<long double>(d);
  if (n > static_cast<long double>(1ll << 34)) throw Error(context + ": shape " + shape_str(s) + " is too large");
  return s;
}

std::string count_mismatch(const std::string& context, const Shape& s, size_t got) {
  return context + ": has " + std::to_string(got) + " values but shape " + shape_str(s) + " needs " +
         std::to_string(num_elements(s));
}

// The narrow types in int32_data: one code per entry for 8-bit types; the sub-byte types' entries each
// hold one byte of the packed storage.
Tensor narrow_from_int32_data(const onnx::TensorProto& p, DType dt, const Shape& shape, const std::string& context) {
  // The count is checked before anything is allocated: a corrupt shape then costs nothing.
  const bool packed = dtype_bits(dt) < 8;
  const int64_t n = num_elements(shape), want = packed ? storage_bytes(dt, n) : n;
  if (p.int32_data_size() != want)
    throw Error(context + ": int32_data has " + std::to_string(p.int32_data_size()) + " entries but shape " +
                shape_str(shape) + " of " + dtype_name(dt) + " needs " + std::to_string(want));
  Tensor t(dt, shape);
  for (int64_t i = 0; i < want; ++i) {
    const auto v = static_cast<uint8_t>(p.int32_data(static_cast<int>(i)));
    if (packed) t.data()[i] = std::byte{v};
    else t.set_code(i, v);
  }
  return t;
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& context) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0)
    throw Error(context + ": external data is not supported (embed the weights in the model)");
  DType dt = dtype_from_int(p.data_type());
  if (!is_supported(dt)) throw Unsupported(context + ": dtype " + dtype_name(dt) + " is not supported");
  Shape shape = proto_shape(p, context);
  // The data must be in the file (external data is rejected), so check its size before allocating:
  // a corrupt shape then costs nothing.
  int64_t n = num_elements(shape);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    size_t want = static_cast<size_t>(storage_bytes(dt, n));
    if (raw.size() != want)
      throw Error(context + ": raw_data has " + std::to_string(raw.size()) + " bytes but shape " + shape_str(shape) +
                  " of " + dtype_name(dt) + " needs " + std::to_string(want));
    Tensor t(dt, shape);
    if (!raw.empty()) std::memcpy(t.data(), raw.data(), raw.size());
    return t;
  }
  int field_size = 0;
  switch (dt) {
    case DType::Float32: field_size = p.float_data_size(); break;
    case DType::Float64: field_size = p.double_data_size(); break;
    case DType::Int64: field_size = p.int64_data_size(); break;
    case DType::UInt32: case DType::UInt64: field_size = p.uint64_data_size(); break;
    default: field_size = p.int32_data_size(); break;
  }
  if (is_narrow(dt)) return narrow_from_int32_data(p, dt, shape, context);
  if (field_size != n) throw Error(count_mismatch(context, shape, static_cast<size_t>(field_size)));
  Tensor t(dt, shape);
  switch (dt) {
    case DType::Float32:
      for (int64_t i = 0; i < n; ++i) t.set_double(i, p.float_data(static_cast<int>(i)));
      break;
    case DType::Float64:
      for (int64_t i = 0; i < n; ++i) t.set_double(i, p.double_data(static_cast<int>(i)));
      break;
    case DType::Int64:
      for (int64_t i = 0; i < n; ++i) t.set_int(i, p.int64_data(static_cast<int>(i)));
      break;
    case DType::UInt32:
    case DType::UInt64:
      for (int64_t i = 0; i < n; ++i) t.set_int(i, static_cast<int64_t>(p.uint64_data(static_cast<int>(i))));
      break;
    case DType::Float16:
    case DType::BFloat16:
      // 16-bit patterns carried in int32_data.
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)));
        std::memcpy(t.data() + 2 * i, &bits, 2);
      }
      break;
    default:  // bool and the narrow ints travel in int32_data
      for (int64_t i = 0; i < n; ++i) t.set_int(i, p.int32_data(static_cast<int>(i)));
      break;
  }
  return t;
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto& p) {
  p.set_data_type(static_cast<int32_t>(t.dtype()));
  p.clear_dims();
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_raw_data(std::string(reinterpret_cast<const char*>(t.data()), t.byte_size()));
}

Tensor load_tensor_file(const std::string& path, std::string* name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_tensor_file(ss.str(), path, name);
}

Tensor parse_tensor_file(const std::string& bytes, const std::string& context, std::string* name) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw Error(context + ": not a valid serialized TensorProto");
  if (name) *name = p.name();
  return tensor_from_proto(p, context);
}

namespace {

IoValue from_sequence(const onnx::SequenceProto& p, const std::string& context) {
  if (p.elem_type() != onnx::SequenceProto::TENSOR && p.elem_type() != onnx::SequenceProto::UNDEFINED)
    throw Unsupported(context + ": only sequences of tensors are supported");
  IoValue v;
  v.kind = ValueKind::Sequence;
  for (int i = 0; i < p.tensor_values_size(); ++i) {
    IoValue e;
    e.tensor = tensor_from_proto(p.tensor_values(i), context + ": tensor " + std::to_string(i));
    v.elements.push_back(std::move(e));
  }
  return v;
}

IoValue from_optional(const onnx::OptionalProto& p, const std::string& context) {
  IoValue v;
  v.kind = ValueKind::Optional;
  if (p.has_tensor_value()) {
    IoValue e;
    e.tensor = tensor_from_proto(p.tensor_value(), context);
    v.elements.push_back(std::move(e));
  } else if (p.has_sequence_value()) {
    v.elements.push_back(from_sequence(p.sequence_value(), context));
  } else if (p.has_sparse_tensor_value() || p.has_map_value() || p.has_optional_value()) {
    throw Unsupported(context + ": only optional tensors and sequences are supported");
  }
  return v;
}

void append_tensors(const IoValue& v, std::vector<Tensor>& out) {
  if (v.kind == ValueKind::Tensor) out.push_back(v.tensor);
  for (const IoValue& e : v.elements) append_tensors(e, out);
}

}  // namespace

IoValue load_value_file(const std::string& path, ValueKind kind, std::string* name) {
  if (kind == ValueKind::Tensor) {
    IoValue v;
    v.tensor = load_tensor_file(path, name);
    return v;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  if (kind == ValueKind::Sequence) {
    onnx::SequenceProto p;
    if (!p.ParseFromString(ss.str())) throw Error(path + ": not a valid serialized SequenceProto");
    if (name) *name = p.name();
    return from_sequence(p, path);
  }
  onnx::OptionalProto p;
  if (!p.ParseFromString(ss.str())) throw Error(path + ": not a valid serialized OptionalProto");
  if (name) *name = p.name();
  return from_optional(p, path);
}

std::vector<Tensor> tensors_of(const IoValue& v) {
  std::vector<Tensor> out;
  append_tensors(v, out);
  return out;
}

void save_tensor_file(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  tensor_to_proto(t, p);
  p.set_name(name);
  std::ofstream out(path, std::ios::binary);
  if (!out || !p.SerializeToOstream(&out)) throw Error(path + ": cannot write file");
}

}  // namespace kiln
