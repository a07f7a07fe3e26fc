/// \file The narrow types (frontend/ir/narrow_types.h) in tensor expressions. Inside a DAG a narrow
/// value is its code in a uint8; in memory (graph inputs and outputs, weights, values between
/// subgraphs) it is stored as the model stores it, packed where narrower than a byte. A stored tensor
/// is unpacked where it is read and packed where it is written, and the conversions are integer and
/// float operations of the expression language, so no op lowering, scheduler pass or backend needs to
/// know the types exist: a packed int4 weight is read and decoded in the loop that uses it.
#pragma once
#include <string>

#include "frontend/ir/narrow_types.h"
#include "scheduler/te/compute.h"

namespace kiln::te {

/// The dtype a value of `t` is computed in inside a DAG: uint8 codes for the narrow types, else `t`.
DType code_dtype(DType t);

/// How a value of dtype `t` and shape `s` lies in memory: narrow types as uint8, 4- and 2-bit ones as
/// their packed bytes (a 1-D tensor of storage_bytes); anything else as it is.
struct StoredForm {
  DType dtype;
  Shape shape;
};
StoredForm stored_form(DType t, const Shape& s);
/// A tensor's bytes as its stored form (a uint8 tensor for the narrow types; `t` itself otherwise).
Tensor stored_tensor(const Tensor& t);
/// The inverse: a stored-form tensor read back as dtype `t` and shape `s`.
Tensor tensor_from_stored(const Tensor& stored, DType t, const Shape& s);

/// A placeholder in stored form for value `name` (a graph input, or a weight when `constant` is set),
/// and the tensor of codes the DAG reads it as (the placeholder itself unless it is packed).
struct StoredInput {
  TensorRef placeholder;
  TensorRef codes;
};
StoredInput stored_input(const std::string& name, DType t, const Shape& s, std::shared_ptr<const Tensor> constant);
/// `codes` (of graph dtype `t`) in stored form: packed by a stage of its own for 4- and 2-bit types.
TensorRef stored_output(const std::string& name, const TensorRef& codes, DType t);
/// Whether `s` is one of the stages above, which move stored bytes and compute no op.
bool is_storage_stage(const Stage& s);

/// A code's value as float32 (any narrow type), or as int32 (narrow integers).
Expr narrow_to_float(const Expr& code, DType t);
Expr narrow_to_int(const Expr& code, DType t);
/// The code of a float32 value in narrow float `t` (narrow_float_encode's rules).
Expr float_to_narrow(const Expr& f32, DType t, bool saturate, PowerRounding power);
/// The code of a float or integer value in narrow integer `t`, as Cast converts: integers wrap, floats
/// truncate and wrap (narrow_int_from_float).
Expr to_narrow_int(const Expr& v, DType t);
/// The code of an integer known to lie in narrow integer `t`'s range (a saturated quantization).
Expr in_range_to_narrow_int(const Expr& v, DType t);

}  // namespace kiln::te
