#include "frontend/partition/op_pattern.h"

#include <map>

#include "frontend/ops/reduce_spec.h"

namespace kiln {

const char* op_pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::ElemWise: return "elemwise";
    case OpPattern::Broadcast: return "broadcast";
    case OpPattern::Injective: return "injective";
    case OpPattern::CommReduce: return "reduce";
    case OpPattern::OutEWiseFusable: return "out-elemwise-fusable";
    case OpPattern::Opaque: return "opaque";
  }
  return "?";
}

OpPattern combine_patterns(OpPattern a, OpPattern b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }

bool is_anchor_pattern(OpPattern p) {
  return p == OpPattern::CommReduce || p == OpPattern::OutEWiseFusable || p == OpPattern::Opaque;
}

namespace {

// One row per pattern; an op absent from every row is Opaque. Rows follow the frontend/ops families.
struct PatternRow {
  OpPattern pattern;
  std::vector<const char*> ops;
};

const std::vector<PatternRow>& pattern_rows() {
  static const std::vector<PatternRow> rows = {
      {OpPattern::ElemWise,
       {// unary math and activations
        "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Elu", "Selu", "Celu",
        "Gelu", "Mish", "Swish", "ThresholdedRelu", "Shrink", "Exp", "Log", "Sqrt", "Reciprocal", "Tanh", "Erf", "Sin",
        "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Floor", "Ceil", "Round",
        "Neg", "Abs", "Sign", "IsNaN", "IsInf", "Not", "BitwiseNot", "Cast",
        // generators: no data inputs, so they fuse into whatever reads them
        "ConstantOfShape", "EyeLike", "Range"}},
      {OpPattern::Broadcast,
       {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And",
        "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "Max", "Min", "Sum", "Mean", "Where", "PRelu",
        "Clip", "CastLike", "QuantizeLinear", "DequantizeLinear"}},
      {OpPattern::Injective,
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose", "Expand", "Tile", "Concat",
        "Split", "Slice", "Gather", "GatherElements", "GatherND", "OneHot", "Pad", "CenterCropPad", "DepthToSpace",
        "SpaceToDepth", "ReverseSequence", "Trilu", "Resize", "Upsample"}},
      {OpPattern::CommReduce,
       {// the Reduce* ops come from frontend/ops/reduce_spec.h's table (pattern_table adds them)
        "ArgMax", "ArgMin", "Softmax", "LogSoftmax", "Hardmax",
        "LayerNormalization", "InstanceNormalization", "GroupNormalization", "RMSNormalization", "LpNormalization",
        "MeanVarianceNormalization", "LRN", "DynamicQuantizeLinear",
        // global pooling is a plain reduction over the spatial axes (TVM files it with pooling)
        "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}},
      {OpPattern::OutEWiseFusable,
       {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MatMul", "Gemm", "MatMulInteger", "QLinearMatMul",
        "Einsum", "MaxPool", "AveragePool", "LpPool"}},
  };
  return rows;
}

const std::map<std::string, OpPattern>& pattern_table() {
  static const std::map<std::string, OpPattern> table = [] {
    std::map<std::string, OpPattern> t;
    for (const PatternRow& row : pattern_rows())
      for (const char* op : row.ops) t.emplace(op, row.pattern);
    for (const ReduceOp& r : reduce_ops()) t.emplace(r.op_type, OpPattern::CommReduce);
    return t;
  }();
  return table;
}

// Inference-mode BatchNormalization is a per-channel affine map (TVM simplifies it to one before
// fusing); in training mode it computes batch statistics, a reduction.
OpPattern batch_norm_pattern(const Node& n) {
  bool training = n.opset >= 14 && n.attr_int("training_mode", 0) != 0;
  return training ? OpPattern::CommReduce : OpPattern::Broadcast;
}

}  // namespace

std::vector<std::pair<std::string, OpPattern>> op_pattern_table_rows() {
  std::vector<std::pair<std::string, OpPattern>> rows;
  for (const PatternRow& row : pattern_rows())
    for (const char* op : row.ops) rows.emplace_back(op, row.pattern);
  for (const ReduceOp& r : reduce_ops()) rows.emplace_back(r.op_type, OpPattern::CommReduce);
  return rows;
}

namespace {

// kiln's own ops (the layout stage's): blocked convs, pools and int8 dot-product convs are anchors
// like Conv and the pools;
// reorders move data.
OpPattern kiln_domain_pattern(const std::string& op_type) {
  if (op_type == "ConvBlocked" || op_type == "DepthwiseConvBlocked" || op_type == "MaxPoolBlocked" ||
      op_type == "AveragePoolBlocked" || op_type == "QLinearConvDot4" || op_type == "QLinearConvBlocked" || op_type == "QLinearMatMulDot4" ||
      op_type == "MatMulIntegerDot4")
    return OpPattern::OutEWiseFusable;
  if (op_type == "ReorderToBlocked" || op_type == "ReorderFromBlocked") return OpPattern::Injective;
  return OpPattern::Opaque;
}

}  // namespace

OpPattern node_op_pattern(const Node& n) {
  if (n.domain == "kiln") return kiln_domain_pattern(n.op_type);
  if (!n.domain.empty() && n.domain != "ai.onnx") return OpPattern::Opaque;
  if (n.op_type == "BatchNormalization") return batch_norm_pattern(n);
  auto it = pattern_table().find(n.op_type);
  return it == pattern_table().end() ? OpPattern::Opaque : it->second;
}

}  // namespace kiln
