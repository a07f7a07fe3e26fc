#include "frontend/ops/op_util.h"

namespace kiln {

void register_misc_ops(OpRegistry&) {}

}  // namespace kiln
