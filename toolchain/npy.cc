#include "toolchain/npy.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "frontend/ir/error.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* code;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"f2", DType::Float16}, {"f4", DType::Float32}, {"f8", DType::Float64}, {"i1", DType::Int8},
    {"i2", DType::Int16},   {"i4", DType::Int32},   {"i8", DType::Int64},   {"u1", DType::UInt8},
    {"u2", DType::UInt16},  {"u4", DType::UInt32},  {"u8", DType::UInt64},  {"b1", DType::Bool},
};

// The value of `key` in the header's Python dict literal, as text.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) throw Error(path + ": .npy header has no '" + key + "'");
  auto colon = header.find(':', k);
  auto start = header.find_first_not_of(' ', colon + 1);
  if (colon == std::string::npos || start == std::string::npos) throw Error(path + ": bad .npy header");
  char open = header[start];
  char close = open == '(' ? ')' : open == '\'' ? '\'' : ',';
  auto end = header.find(close, start + 1);
  if (end == std::string::npos) throw Error(path + ": bad .npy header");
  return header.substr(start, end - start + (close == ',' ? 0 : 1));
}

// The shape tuple "(2, 3)" / "(4,)" / "()": every item a non-negative integer whose product, in bytes of
// `elem_bytes`, fits in memory arithmetic. Checked before any allocation: the header is untrusted text.
Shape parse_shape(const std::string& tuple, size_t elem_bytes, const std::string& path) {
  auto bad = [&](const std::string& why) { return Error(path + ": .npy header 'shape' " + tuple + ": " + why); };
  if (tuple.size() < 2 || tuple.front() != '(' || tuple.back() != ')') throw bad("not a tuple");
  Shape shape;
  uint64_t bytes = elem_bytes;
  std::stringstream ds(tuple.substr(1, tuple.size() - 2));
  std::string item;
  while (std::getline(ds, item, ',')) {
    const auto first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const auto last = item.find_last_not_of(' ');
    int64_t d = -1;
    auto [end, ec] = std::from_chars(item.data() + first, item.data() + last + 1, d);
    if (ec != std::errc() || end != item.data() + last + 1 || d < 0) throw bad("'" + item + "' is not a dimension");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) throw bad("too many elements");
    shape.push_back(d);
  }
  return shape;
}

}  // namespace

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

Tensor parse_npy(const std::string& data, const std::string& path) {
  if (data.size() < 10 || data.compare(0, 6, kMagic, 6) != 0) throw Error(path + ": not a .npy file");
  int major = static_cast<unsigned char>(data[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | static_cast<size_t>(static_cast<unsigned char>(data[9])) << 8;
    offset = 10;
  } else {
    if (data.size() < 12) throw Error(path + ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    offset = 12;
  }
  if (offset + header_len > data.size()) throw Error(path + ": truncated .npy header");
  const std::string header = data.substr(offset, header_len);
  std::string descr = dict_value(header, "descr", path);
  if (dict_value(header, "fortran_order", path).find("True") != std::string::npos)
    throw Error(path + ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  // descr is like '<f4' or '|u1': the byte order must be little-endian or irrelevant.
  if (descr.size() != 5 || (descr[1] == '>' && descr.substr(2, 2) != "i1" && descr.substr(2, 2) != "u1"))
    throw Error(path + ": dtype " + descr + " is not supported (need little-endian numbers)");
  DType dtype = DType::Undefined;
  for (const Descr& d : kDescrs)
    if (descr.substr(2, 2) == d.code) dtype = d.dtype;
  if (dtype == DType::Undefined) throw Error(path + ": dtype " + descr + " is not supported");
  const Shape shape = parse_shape(dict_value(header, "shape", path), dtype_size(dtype), path);
  uint64_t bytes = dtype_size(dtype);
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);  // cannot overflow: parse_shape checked it
  if (data.size() - offset - header_len != bytes)
    throw Error(path + ": data size does not match shape " + shape_str(shape));
  Tensor t(dtype, shape);
  if (t.byte_size()) std::memcpy(t.data(), data.data() + offset + header_len, t.byte_size());
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  const char* code = nullptr;
  for (const Descr& d : kDescrs)
    if (d.dtype == t.dtype()) code = d.code;
  if (!code) throw Error(path + ": cannot write dtype " + dtype_name(t.dtype()) + " as .npy");
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  if (t.rank() > 1) shape.resize(shape.size() - 1);
  if (t.rank() > 1) shape.back() = ')';
  else shape = t.rank() == 1 ? "(" + std::to_string(t.shape()[0]) + ",)" : "()";
  std::string header = std::string("{'descr': '") + (std::strcmp(code, "u1") == 0 || std::strcmp(code, "i1") == 0 || std::strcmp(code, "b1") == 0 ? "|" : "<") +
                       code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write(kMagic, 6);
  out.put(1);
  out.put(0);
  out.put(static_cast<char>(header.size() & 0xff));
  out.put(static_cast<char>(header.size() >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.byte_size()));
  if (!out) throw Error(path + ": cannot write file");
}

Tensor load_tensor_any(const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return load_npy(path);
  return load_tensor_file(path);
}

}  // namespace kiln
