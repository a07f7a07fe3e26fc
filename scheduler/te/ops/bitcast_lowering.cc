// BitCast as a tensor expression where it is a conversion; otherwise the reference kernel.
#include <functional>
#include <string>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te::misc {
namespace {

bool is_bitwise_int(DType t) { return t == DType::Bool || is_integer(t); }

// A 32- or 64-bit float read as an integer of its width or back: the expression language's reinterpret.
bool is_word(DType t) {
  return t == DType::Float32 || t == DType::Int32 || t == DType::UInt32 || t == DType::Float64 || t == DType::Int64 ||
         t == DType::UInt64;
}

// Between integer dtypes of one width a bit cast is the wrapping conversion, and between a float and an
// integer of one word's width a reinterpretation, both loop nests; the rest (a change of width, half
// floats) reinterprets bytes the expressions have no operation for, so it runs the reference kernel.
void lower_bitcast(LowerContext& c) {
  DType from = c.dtype(0), to = c.out_dtype(0);
  if (is_word(from) && is_word(to) && dtype_size(from) == dtype_size(to) && (is_float(from) || is_float(to))) {
    const TensorRef& x = c.input(0);
    c.set_output(0, compute(c.name(), "elementwise", to, c.out_shape(0),
                            [&](const std::vector<Expr>& idx) { return reinterpret(to, at(x, idx)); }));
    return;
  }
  if (is_bitwise_int(from) && is_bitwise_int(to) && dtype_size(from) == dtype_size(to)) {
    const TensorRef& x = c.input(0);
    c.set_output(0, compute(c.name(), "elementwise", to, c.out_shape(0), [&](const std::vector<Expr>& idx) {
      // bool -> uint8 is 0/1; uint8 -> bool keeps any nonzero byte as true, as the bytes would.
      return cast(to, at(x, idx));
    }));
    return;
  }
  c.set_output(0, extern_stage(c.name(), c.node(), {c.input(0)}, 0, to, c.out_shape(0)));
}

}  // namespace

void register_bitcast_lowering(LoweringRegistry& r) {
  r.add({"BitCast", "", lower_bitcast});
}

}  // namespace kiln::te::misc
