#include "frontend/ops/op_util.h"

namespace kiln {

void register_signal_ops(OpRegistry&) {}

}  // namespace kiln
