/// \file Rewrites of a float model that `kiln quantize` makes before it quantizes, so that weights are
/// constants and a bias is added to the int32 accumulator (exactly, in integers) rather than to int8
/// codes after the fact:
///   materialize_weights computed weights (a Reshape of an initializer, as CNTK exports mnist-8's) that
///                       a Conv, MatMul, Gemm or Add reads: initializers, valued as kiln's shape
///                       inference folded them; the nodes that computed them go;
///   conv_add_to_bias    Conv whose output only an Add of a per-channel constant reads: the constant
///                       becomes (or is added to) the Conv's bias (exporters of mnist-8's kind write
///                       the bias as a separate Add);
///   conv_bn_to_conv     Conv whose output only an inference-mode BatchNormalization reads: the
///                       normalization scales the filter and the bias (PyTorch exports in training
///                       layout, kiln's zoo); quantizing after it would round the normalized values
///                       through a float op each runtime computes in its own order;
///   matmul_add_to_gemm  MatMul of a matrix by a constant matrix whose output only an Add of a constant
///                       row reads: one Gemm with that row as its bias (Keras-style dense layers).
/// Those are what ONNX Runtime's own graph optimizer does to such models before its quantizer runs.
///   relu_before_max_pool MaxPool whose output only a Relu reads, of a value only it reads: the Relu
///                       goes first (max and relu commute exactly), so it follows its producer (a
///                       Conv: PyTorch's conv-pool-relu order) and is absorbed into the Conv's output
///                       range instead of staying float between a pair of QDQs. ORT's quantizer does
///                       not do this; the model it is given is the rewritten one, so it computes the
///                       same codes.
/// They work on the ModelProto, which `kiln quantize` writes back out; each returns one line per
/// rewrite for the command's log.
#pragma once
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace onnx {
class GraphProto;
}

namespace kiln {

/// `inferred` is the same model imported and shape-inferred by kiln (its constants are folded).
std::vector<std::string> materialize_weights(onnx::GraphProto& g, const Graph& inferred);

std::vector<std::string> conv_add_to_bias(onnx::GraphProto& g);
std::vector<std::string> conv_bn_to_conv(onnx::GraphProto& g);
std::vector<std::string> matmul_add_to_gemm(onnx::GraphProto& g);
std::vector<std::string> relu_before_max_pool(onnx::GraphProto& g);

}  // namespace kiln
