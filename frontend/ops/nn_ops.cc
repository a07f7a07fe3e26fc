#include "frontend/ops/op_util.h"

namespace kiln {

void register_nn_ops(OpRegistry&) {}

}  // namespace kiln
