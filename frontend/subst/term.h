/// \file TASO's operators (SOSP'19, table 1) as symbolic terms: the language graph substitutions and
/// the axioms that verify them are written in (issue 20).
///
/// Why terms of their own and not kiln's Graph: a substitution is a pattern over symbolic tensors,
/// compared, hashed, printed and (later) handed to Z3 as an expression; a Graph is one concrete model.
/// A term is evaluated by writing it as ONNX nodes (term_graph.h) and running kiln's reference
/// interpreter, so every operator means exactly what the ONNX op it stands for means.
///
/// Leaves are named tensors: variables (x, y, w, ...) and the constants of TASO's table (I_matmul,
/// I_conv, C_pool, I_ewmul, scalars), whose values a check supplies. Operators: ewadd, ewmul, smul
/// (by a scalar), transpose (of the last two axes), matmul, conv (grouped, stride 1 or 2, "same" or
/// "valid" padding, with or without a bias and a fused relu), enlarge (a kernel zero-padded to 3x3), relu, pool_avg and
/// pool_max (3x3, stride 1, "same"), concat (on an axis) and split0 / split1 (the two parts of a
/// split on an axis at a given extent).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/ir/tensor.h"

namespace kiln::subst {

struct Term;
using TermRef = std::shared_ptr<const Term>;

struct Term {
  std::string op;  // "leaf" or an operator name above
  std::vector<TermRef> args;
  std::string name;  // a leaf's name
  int64_t axis = 0;  // concat, split0, split1
  /// split0, split1: the first part's extent along the axis; -1: the extent of leaf `split_leaf` along
  /// `split_leaf_axis` (-1: along the split's axis), which a substitution knows only symbolically.
  int64_t split_at = 0;
  std::string split_leaf = "x";
  int64_t split_leaf_axis = -1;
  int64_t group = 1;     // conv: groups; 0: one per input channel (depthwise)
  int64_t stride = 1;    // conv: along both spatial axes
  /// conv: "same" padding ((k - 1) / 2 zeros at both ends of each axis, PyTorch's padding=k//2,
  /// which at stride 1 is ONNX's SAME_UPPER; at stride 2 it is not), else "valid"
  bool same = true;
  bool relu = false;     // conv: relu fused
  int64_t from = 1;      // enlarge: the kernel's extent before
};

TermRef leaf(const std::string& name);
TermRef ewadd(TermRef a, TermRef b);
TermRef ewmul(TermRef a, TermRef b);
TermRef smul(TermRef x, TermRef scalar);
TermRef transpose(TermRef x);
/// x + b with b one value per column, broadcast over the rows (a Linear layer's bias: ONNX Add of a
/// [..., n] tensor and an [n] vector).
TermRef biasadd(TermRef x, TermRef b);
TermRef matmul(TermRef a, TermRef b);
TermRef conv(TermRef x, TermRef w, bool same = true, bool relu = false, int64_t group = 1, int64_t stride = 1);
/// A conv with a bias `b` (one value per kernel, added to its output channel before the relu): ONNX
/// Conv's third input, which every conv with a folded batch norm has.
TermRef conv_bias(TermRef x, TermRef w, TermRef b, bool same = true, bool relu = false, int64_t group = 1,
                  int64_t stride = 1);
TermRef enlarge(TermRef w, int64_t from);
TermRef relu(TermRef x);
TermRef pool_avg(TermRef x);
TermRef pool_max(TermRef x);
TermRef concat(int64_t axis, TermRef a, TermRef b);
TermRef split0(int64_t axis, int64_t at, TermRef x);
TermRef split1(int64_t axis, int64_t at, TermRef x);
/// split0 / split1 at the extent of leaf `leaf` along `leaf_axis`: how a merged conv's output splits
/// back into the two convs' (at the first kernel's count).
TermRef split0_at(int64_t axis, const std::string& leaf, int64_t leaf_axis, TermRef x);
TermRef split1_at(int64_t axis, const std::string& leaf, int64_t leaf_axis, TermRef x);

/// "ewadd(x, conv[valid,relu](y, w))": operators with their parameters in brackets where they are
/// not the defaults.
std::string to_string(const TermRef& t);

/// A kernel term's filter count and spatial extents, from its leaves' shapes (`leaf_shape`): a
/// writer needs them for a depthwise conv's group count and a strided conv's pads when the kernel
/// is a sum or an enlargement, whose value has no shape yet. Throws Error on a kernel it cannot
/// size (a leaf that is not 4-d, an operator that is not a kernel's).
struct KernelShape {
  int64_t filters = 0, height = 0, width = 0;
};
KernelShape kernel_shape(const Term& kernel, const std::function<Shape(const std::string&)>& leaf_shape);

/// The leaf names of `t`, each once, in order of first appearance.
std::vector<std::string> leaves(const TermRef& t);

}  // namespace kiln::subst
