#include "scheduler/te/ops/lowering_util.h"

namespace kiln::te {

void register_misc_lowerings(LoweringRegistry&) {}

}  // namespace kiln::te
