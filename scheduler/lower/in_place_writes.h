/// \file Outputs written over a dying input: the pairs of workspace buffers that may share bytes
/// although one statement reads the first and writes the second.
///
/// Why: the memory plan keeps two buffers apart when their live ranges meet, and a statement's input
/// and output meet at it. But an elementwise statement (a ReLU, a residual Add in a conv's epilogue, a
/// quantize) reads each element of an input that dies there only to compute the same element of its
/// output, so the output can take the input's bytes, as ONNX Runtime and TFLite Micro do for such ops.
/// A residual block's arena holds its skip value, its conv's input and its output at once; in place,
/// the output takes the skip value's bytes.
///
/// The proof is over the loop IR of the statement, so it holds for any schedule (tiles, a main loop and
/// its tail, vectors, threads). For an input A that dies at the statement and an output B born there,
/// both workspace with no view inside them, of one dtype and size:
///   1. every load of A is in the value of a store to B, at the same index (equal affine forms, else
///      Z3 under the loops' ranges and the conditions around the store);
///   2. no element of B is stored twice: Z3 finds no two iterations of the stores to B (one store
///      twice, or two stores) at one index, over the loops' ranges and the conditions on them alone;
///   3. B is not read, and neither is an argument of a runtime-kernel call.
/// Then each element of A is read only by the one store that overwrites it, before it does. A store
/// index that reads memory (a scatter) is not proven and keeps the two apart.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "scheduler/lower/lower_model.h"

namespace kiln::lower {

/// A pair whose bytes may coincide: `read` (an index into ModelProgram::params) dies at statement
/// `statement` of func.body, which writes `written`, born there.
struct InPlaceWrite {
  size_t read = 0;
  size_t written = 0;
  size_t statement = 0;
};

/// Every pair the three conditions above prove, in statement order. Statements of a loop (several
/// steps) are not examined. A pair is only a permission: the memory plan decides which it uses.
std::vector<InPlaceWrite> find_in_place_writes(const ModelProgram& p);

/// "relu1 over conv1 (statement 4)", one per line.
std::string print_in_place_writes(const ModelProgram& p, const std::vector<InPlaceWrite>& writes);

}  // namespace kiln::lower
