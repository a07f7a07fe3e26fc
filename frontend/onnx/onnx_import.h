/// \file ONNX import: ModelProto (parsed with libonnx's protobuf classes) -> kiln Graph.
#pragma once
#include <string>

#include "frontend/ir/graph.h"

namespace kiln {

struct ImportOptions {
  /// Also run libonnx's checker where it applies (IR <= 8, opset <= 17), after kiln's own checks so
  /// that kiln's more specific messages win. Off, kiln accepts what the checker would reject but kiln
  /// can still import faithfully (nodes out of topological order, attributes without a type field).
  bool onnx_checker = true;
};

/// Reads and imports an ONNX model file. The result is topologically sorted, every node's op is one
/// kiln supports, every initializer is a typed constant; shapes of inner values are not yet inferred
/// (see passes/infer_shapes.h). Throws Error (one line naming the file and the node or field) for
/// malformed models and Unsupported for well-formed ones that use what kiln does not claim.
Graph import_onnx_file(const std::string& path, const ImportOptions& opts = {});

/// Same, from serialized bytes; `source` names them in messages. Used by the fuzzer and tests.
Graph import_onnx_bytes(const std::string& bytes, const std::string& source, const ImportOptions& opts = {});

/// The opset range of the default domain kiln accepts.
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 28;

}  // namespace kiln
