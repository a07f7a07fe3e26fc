#include "frontend/quantize/proto_graph.h"

#include <onnx/onnx_pb.h>

#include "frontend/onnx/tensor_proto.h"

namespace kiln {

onnx::TensorProto* find_initializer(onnx::GraphProto& g, const std::string& name) {
  for (auto& t : *g.mutable_initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::optional<Tensor> float_initializer(onnx::GraphProto& g, const std::string& name) {
  const onnx::TensorProto* t = name.empty() ? nullptr : find_initializer(g, name);
  if (!t || t->data_type() != onnx::TensorProto::FLOAT) return std::nullopt;
  return tensor_from_proto(*t, "initializer '" + name + "'");
}

void set_initializer(onnx::GraphProto& g, const std::string& name, const Tensor& value) {
  onnx::TensorProto* t = find_initializer(g, name);
  if (!t) t = g.add_initializer();
  t->Clear();
  tensor_to_proto(value, *t);
  t->set_name(name);
}

int count_readers(const onnx::GraphProto& g, const std::string& value) {
  int n = 0;
  for (const auto& node : g.node())
    for (const auto& in : node.input()) n += in == value;
  for (const auto& out : g.output()) n += out.name() == value;
  return n;
}

std::optional<int> sole_reader(const onnx::GraphProto& g, const std::string& value) {
  if (count_readers(g, value) != 1) return std::nullopt;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& in : g.node(i).input())
      if (in == value) return i;
  return std::nullopt;  // the one reader is a graph output
}

void drop_unread_initializers(onnx::GraphProto& g) {
  auto* inits = g.mutable_initializer();
  std::set<std::string> dropped;
  for (int i = inits->size() - 1; i >= 0; --i)
    if (count_readers(g, inits->Get(i).name()) == 0) {
      dropped.insert(inits->Get(i).name());
      inits->DeleteSubrange(i, 1);
    }
  // Models of IR version 3 list their initializers as graph inputs too: those go with them.
  auto* inputs = g.mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (dropped.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
}

int value_rank(const onnx::GraphProto& g, const std::string& value) {
  auto rank_of = [&](const auto& infos) -> int {
    for (const auto& v : infos)
      if (v.name() == value && v.type().has_tensor_type() && v.type().tensor_type().has_shape())
        return v.type().tensor_type().shape().dim_size();
    return -1;
  };
  for (int r : {rank_of(g.value_info()), rank_of(g.input()), rank_of(g.output())})
    if (r >= 0) return r;
  return -1;
}

void remove_node(onnx::GraphProto& g, int index) { g.mutable_node()->DeleteSubrange(index, 1); }

NameSet::NameSet(const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    taken_.insert(n.name());
    for (const auto& v : n.input()) taken_.insert(v);
    for (const auto& v : n.output()) taken_.insert(v);
  }
  for (const auto& t : g.initializer()) taken_.insert(t.name());
  for (const auto& v : g.input()) taken_.insert(v.name());
  for (const auto& v : g.output()) taken_.insert(v.name());
}

std::string NameSet::fresh(const std::string& base) {
  std::string name = base;
  for (int k = 1; taken_.count(name); ++k) name = base + "." + std::to_string(k);
  taken_.insert(name);
  return name;
}

}  // namespace kiln
