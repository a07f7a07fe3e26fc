/// \file Node attributes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "frontend/ir/tensor.h"

namespace kiln {

/// One attribute value, as ONNX's AttributeProto carries it. Subgraph attributes (If/Loop/Scan bodies)
/// are kept only as a marker: kiln does not support control flow.
struct SubgraphAttr {};
using AttrValue = std::variant<int64_t, double, std::string, Tensor, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, SubgraphAttr>;

std::string attr_kind_name(const AttrValue& v);  // "int", "float", "string", "tensor", "ints", ...

using Attributes = std::map<std::string, AttrValue>;

}  // namespace kiln
