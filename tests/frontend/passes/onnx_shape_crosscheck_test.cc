// kiln's own shape inference checked against an implementation kiln did not write: libonnx's, which
// knows opsets <= 17. For every ONNX node test and real model in ../shared that both can handle,
// every value whose shape libonnx infers completely must have the same dtype and shape in kiln.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

const fs::path kShared = fs::path(KILN_SOURCE_DIR) / ".." / "shared";

std::vector<fs::path> case_dirs() {
  std::vector<fs::path> dirs;
  for (const char* sub : {"onnx-node", "models"}) {
    if (!fs::exists(kShared / sub)) continue;
    for (const auto& e : fs::recursive_directory_iterator(kShared / sub))
      if (e.path().filename() == "model.onnx") dirs.push_back(e.path().parent_path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

struct Counts {
  int models = 0, values = 0;
};

// Returns false when the case is outside what both sides handle.
bool crosscheck(const fs::path& dir, Counts& counts) {
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  onnx::ModelProto m;
  if (!m.ParseFromString(ss.str()) || m.ir_version() > 8) return false;
  for (const auto& o : m.opset_import())
    if (!o.domain().empty() || o.version() > 17) return false;

  Graph g;
  try {
    g = import_onnx_bytes(ss.str(), dir.string(), {.onnx_checker = false});
  } catch (const Error&) {
    return false;  // unsupported by kiln
  }
  if (!g.composite_inputs.empty()) return false;  // sequence inputs: the conformance runner covers these
  // Bind inputs to the test data's shapes on both sides.
  ShapeBindings b;
  auto set0 = dir / "test_data_set_0";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto f = set0 / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(f)) return false;
    b.input_shapes[g.inputs[i]] = load_tensor_file(f.string()).shape();
  }
  for (auto& vi : *m.mutable_graph()->mutable_input()) {
    auto it = b.input_shapes.find(vi.name());
    if (it == b.input_shapes.end()) continue;
    auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second) shape->add_dim()->set_dim_value(d);
  }
  m.mutable_graph()->clear_value_info();
  try {
    bind_input_shapes(g, b);
    infer_shapes(g);
  } catch (const NotConstant&) {
    return false;  // shapes depend on input values: the conformance runner covers these
  } catch (const Unsupported&) {
    return false;
  }
  try {
    onnx::shape_inference::InferShapes(m);
  } catch (const std::exception&) {
    return false;  // libonnx cannot handle it: nothing to compare with
  }
  ++counts.models;
  for (const auto& vi : m.graph().value_info()) {
    if (!g.has_value(vi.name()) || !vi.type().has_tensor_type()) continue;
    const auto& tt = vi.type().tensor_type();
    if (!tt.has_shape()) continue;
    Shape onnx_shape;
    bool complete = true;
    for (const auto& d : tt.shape().dim()) {
      complete &= d.has_dim_value();
      onnx_shape.push_back(d.dim_value());
    }
    if (!complete) continue;
    const Value& v = g.value(vi.name());
    EXPECT_EQ(shape_str(v.shape), shape_str(onnx_shape)) << dir.filename() << ": value '" << vi.name() << "'";
    if (tt.elem_type() != 0) {
      EXPECT_EQ(dtype_name(v.dtype), dtype_name(dtype_from_int(tt.elem_type())))
          << dir.filename() << ": value '" << vi.name() << "'";
    }
    ++counts.values;
  }
  return true;
}

TEST(OnnxShapeCrosscheck, AgreesWithLibonnxWhereItApplies) {
  auto dirs = case_dirs();
  if (dirs.empty()) GTEST_SKIP() << "../shared is not present beside the checkout";
  Counts counts;
  for (const auto& d : dirs) crosscheck(d, counts);
  std::cout << "compared " << counts.values << " values in " << counts.models << " models\n";
  // Guard against the comparison silently covering nothing.
  EXPECT_GT(counts.models, 300);
  EXPECT_GT(counts.values, 2000);
}

}  // namespace
}  // namespace kiln
