/// \file TensorProto <-> Tensor, and the .pb tensor files of ONNX's test-case layout.
#pragma once
#include <string>

#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/ir/tensor.h"

namespace onnx {
class TensorProto;
}

namespace kiln {

/// Converts a TensorProto (raw_data or the typed repeated fields). `context` names the tensor in
/// messages (e.g. "model.onnx: initializer 'conv1.weight'"). Rejects external data, a data size that
/// does not match the shape, and unsupported dtypes.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& context);
void tensor_to_proto(const Tensor& t, onnx::TensorProto& proto);

/// A serialized TensorProto file (test_data_set_N/input_0.pb). The tensor's name is returned in `name`.
Tensor load_tensor_file(const std::string& path, std::string* name = nullptr);
/// The same from the file's bytes; `context` (the file's name) starts every message.
Tensor parse_tensor_file(const std::string& bytes, const std::string& context, std::string* name = nullptr);
void save_tensor_file(const std::string& path, const Tensor& t, const std::string& name);

/// A value of ONNX's test data: a tensor, a sequence of tensors, or an optional holding one value (a
/// tensor or a sequence) or none.
struct IoValue {
  ValueKind kind = ValueKind::Tensor;
  Tensor tensor;
  std::vector<IoValue> elements;
};
/// A serialized TensorProto, SequenceProto or OptionalProto file, as `kind` says; its name in `name`.
IoValue load_value_file(const std::string& path, ValueKind kind, std::string* name = nullptr);
/// The tensors `v` holds, depth first (in the order Graph::io_parts lists them).
std::vector<Tensor> tensors_of(const IoValue& v);

}  // namespace kiln
