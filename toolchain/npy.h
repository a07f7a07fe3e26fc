/// \file NumPy .npy files: how users of `kiln run` hand in inputs they made with numpy.
#pragma once
#include <string>

#include "frontend/ir/tensor.h"

namespace kiln {

/// Reads a version 1.x/2.x .npy file: little-endian or byte-order-free dtypes kiln supports (f2, f4, f8,
/// i1..i8, u1..u8, b1), C order. Throws Error naming the file for anything else.
Tensor load_npy(const std::string& path);
/// The same from the file's bytes; `context` (the file's name) starts every message.
Tensor parse_npy(const std::string& bytes, const std::string& context);
void save_npy(const std::string& path, const Tensor& t);

/// An input file by extension: .npy, or a serialized TensorProto (.pb).
Tensor load_tensor_any(const std::string& path);

}  // namespace kiln
