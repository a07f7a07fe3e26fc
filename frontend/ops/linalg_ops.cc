#include "frontend/ops/op_util.h"

namespace kiln {

void register_linalg_ops(OpRegistry&) {}

}  // namespace kiln
