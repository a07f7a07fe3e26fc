/// \file `kiln quantize`: static post-training quantization of a float ONNX model into the QDQ form
/// (QuantizeLinear/DequantizeLinear pairs around float ops, int8 weights behind DequantizeLinear), the
/// form ONNX Runtime's quantizer writes by default and every QDQ-aware runtime (kiln, ONNX Runtime,
/// TensorRT) turns into integer kernels. The steps, each its own unit:
///   opset 13          older models go through ONNX's version converter (per-channel scales need 13);
///   float rewrites    biases into their Conv / Gemm (float_rewrites.h);
///   plan              what is quantized (qdq_plan.h);
///   calibrate         each planned value's range over the sample inputs (calibrate.h);
///   write             scales and codes (quant_params.h), the pairs and the int8 weights.
/// Everything not planned stays as the user wrote it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/tensor.h"
#include "frontend/passes/bind_input_shapes.h"

namespace kiln {

struct QuantizeOptions {
  DType activations = DType::UInt8;  // or Int8
  bool per_channel = false;          // weights: a scale per output channel
  bool reduce_range = false;         // 7-bit codes (quant_params.h says when that is needed)
  ShapeBindings bindings;            // shapes for the calibration runs
  /// Also make every quantized activation's codes (the QuantizeLinear outputs) graph outputs, so that
  /// two runtimes can be compared layer by layer, exactly.
  bool expose_codes = false;
};

struct QuantizeResult {
  std::string model;             // the serialized quantized ModelProto
  std::vector<std::string> log;  // one line per rewrite, then a summary
};

/// Quantizes the model at `path`, calibrated on `samples` (graph inputs by name). Throws Error (one
/// line naming the file) for what it cannot quantize.
QuantizeResult quantize_model(const std::string& path, const QuantizeOptions& o,
                              const std::vector<std::map<std::string, Tensor>>& samples);

}  // namespace kiln
