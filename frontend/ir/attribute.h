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

struct Graph;

/// A subgraph attribute (an If branch, a Loop or Scan body): a graph whose nodes may read values of the
/// graphs around it (outer-scope references) by name. Null for a list of graphs (GRAPHS), which no op
/// kiln handles takes.
struct SubgraphAttr {
  std::shared_ptr<const Graph> graph;
};
using AttrValue = std::variant<int64_t, double, std::string, Tensor, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, SubgraphAttr>;

std::string attr_kind_name(const AttrValue& v);  // "int", "float", "string", "tensor", "ints", ...

using Attributes = std::map<std::string, AttrValue>;

}  // namespace kiln
