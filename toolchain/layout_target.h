/// \file What the layout stage needs to know of a target: its vector width (the blocks of float
/// layouts, frontend/layout/block_layout.h) and whether it has a four-byte integer dot product (int8
/// convs as kiln.QLinearConvDot4, frontend/layout/int8_dot_layout.h). Every command that makes tasks
/// for a target passes the same facts, so tuning, measuring and compiling see the same tasks.
#pragma once
#include <string>

#include "targets/target.h"

namespace kiln {

struct LayoutTarget {
  int vector_bits = 0;    ///< the widest float vector; 0 for none (GPU programs keep NCHW)
  bool int8_dot = false;  ///< int8 convs as four-byte dot products (kiln.QLinearConvDot4)
  bool signed_dot = false;  ///< ... of signed by signed bytes (AArch64's sdot), not unsigned by signed
  /// Implicit from a width alone: a target without an int8 dot product.
  LayoutTarget(int bits = 0, bool dot = false, bool signed_bytes = false)  // NOLINT
      : vector_bits(bits), int8_dot(dot), signed_dot(signed_bytes) {}
};

/// The layout facts of a target with `vector_bits`-wide vectors, LLVM triple `triple` and LLVM
/// feature string `features` ("+neon,+dotprod,...").
LayoutTarget layout_target(int vector_bits, const std::string& triple, const std::string& features);
LayoutTarget layout_target(const Target& t);

}  // namespace kiln
