/// \file Every buffer access of a lowered program proven inside its buffer before the program runs.
///
/// A wrong loop extent or index in a schedule (a split whose guard is missing, a cache stage whose
/// region was inferred too small) writes or reads outside a buffer: a crash at best (some searched
/// candidates died with SIGSEGV), silently wrong numbers or corrupted memory at worst. Such a program
/// must be refused, not run. For each Store and each Load (codegen clamps loads under a select into
/// their buffer, so those need no proof) the check bounds its flat index over every value of the
/// loops around it: first by interval arithmetic (scheduler/state/index_interval.h), which proves
/// almost every access of a default schedule at once; what that cannot prove goes to Z3, with the
/// loop ranges and the conditions of the enclosing if-statements as facts. An index that neither
/// proves (Z3 finds loop values that leave the buffer, or the index is beyond what it can express)
/// is a violation. Prefetches never fault and are not checked.
///
/// The stack is a buffer too. Codegen allocates every local buffer (register tiles, cache stages,
/// padded planes) in its function's frame, so a schedule with a big cache stage overflowed the 8 MiB
/// stack of a thread: resnet3d18's random programs (kiln compile --schedule random, seeds 0-9) asked for
/// up to 22 MB, and the one of seed 3 died with SIGSEGV (it runs with an unlimited stack). The locals of
/// the function and of the parallel tasks it calls must fit kMaxStackBytes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "frontend/ir/error.h"
#include "scheduler/lower/loop_ir.h"

namespace kiln::lower {

/// One access that may leave its buffer.
struct BoundsViolation {
  std::string buffer;
  int64_t size = 0;
  std::string access;  ///< "store" or "load"
  std::string index;   ///< the index expression, printed
  std::string why;     ///< e.g. "i0 = 3, i1 = 7 make it 52" or "not an integer expression the check can bound"
};

/// The stack that a lowered program's local buffers may take: the function's own and those of the
/// parallel task it runs (a task runs on the calling thread too). Far above what a default schedule
/// needs (register tiles, 16 KiB padded planes) and far below a thread's usual 8 MiB; firmware with a
/// smaller stack sees the figure in the error.
inline constexpr int64_t kMaxStackBytes = int64_t{1} << 20;

/// The copies of a local allocated inside a vectorized loop on a target with `vector_bits`-wide vectors:
/// one per lane of its narrowest type (int8), the most any loop of it has.
inline int lanes_of(int vector_bits) { return vector_bits >= 16 ? vector_bits / 8 : 1; }

/// The first access of `body` (in statement order) not proven inside its buffer, or nullopt when every
/// access is proven. A body whose local buffers need more than `max_stack` bytes of stack is a violation
/// of the buffer "stack". `lanes`: the copies of a buffer allocated inside a vectorized loop (one per
/// lane); the widest vector of any target by default.
std::optional<BoundsViolation> first_out_of_bounds(const Stmt& body, int64_t max_stack = kMaxStackBytes, int lanes = 64);

/// One line: "a store of conv (size 401408) at <index> may leave it: i0 = 3 make it 401410", or for the
/// stack "its local buffers need N bytes of stack, over the limit of M".
std::string describe(const BoundsViolation& v);

/// A program refused because an access may leave its buffer.
class BoundsError : public Error {
 public:
  using Error::Error;
};

/// Throws BoundsError naming the function, the buffer and the index of the first access not proven.
/// `lanes` as in first_out_of_bounds: a target's vector bytes (its widest lane count, int8's).
void check_bounds(const LoweredFunc& f, int lanes = 64);

}  // namespace kiln::lower
