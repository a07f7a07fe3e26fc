/// \file How an operator may fuse with its neighbours: TVM's op pattern kinds, from one per-op table.
///
/// The partitioner needs a node's pattern before anything is lowered, and the frontend must not depend
/// on the scheduler, so the pattern comes from a table keyed by op type (TVM registers `TOpPattern`
/// per op the same way) rather than from the TE lowering's stage tags.
/// tests/scheduler/te/op_consistency_test.cc keeps the two in agreement: it lowers the zoo models and
/// every ONNX node test node by node and checks the stage tags ("elementwise", "broadcast",
/// "injective", "reduction", "conv"/"matmul"/"pool", "extern") against this table: the table is never
/// finer than the tags, and where it is coarser the op is listed there with why.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

/// Ordered from most to least fusable, as in TVM: a group's pattern is the largest of its members'.
enum class OpPattern {
  ElemWise = 0,         // out[i] = f(in[i]) on one shape (Relu, Cast)
  Broadcast = 1,        // elementwise after broadcasting inputs to the output shape (Add, BN in inference)
  Injective = 2,        // every output element reads some input elements, no arithmetic across them
                        // (Reshape, Transpose, Gather, Concat, Pad, Resize)
  CommReduce = 3,       // reductions and what is built on one (ReduceMean, Softmax, LayerNormalization,
                        // GlobalAveragePool)
  OutEWiseFusable = 4,  // anchors whose elementwise consumers fuse in: Conv, MatMul, Gemm, windowed pooling
  Opaque = 8,           // never fused with anything (TopK, NMS, Attention, ops with no table entry)
};

const char* op_pattern_name(OpPattern p);  // "elemwise", "broadcast", ...
/// The larger (less fusable) of two patterns.
OpPattern combine_patterns(OpPattern a, OpPattern b);
/// An anchor owns a subgraph: at most one per subgraph (CommReduce, OutEWiseFusable, Opaque).
bool is_anchor_pattern(OpPattern p);

/// The pattern of a run-time node. Looks at attributes where they change the kind of computation
/// (BatchNormalization's training mode). Ops outside the default domain, and ops the table does not
/// list, are Opaque: they form a subgraph of their own, which is always correct, only less fused.
OpPattern node_op_pattern(const Node& n);

/// Every op type the table names (default domain), with its pattern: for the test that checks the
/// table against the op registry and the TE lowerings.
std::vector<std::pair<std::string, OpPattern>> op_pattern_table_rows();

}  // namespace kiln
