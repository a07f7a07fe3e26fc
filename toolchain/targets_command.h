/// \file `kiln targets [NAME]`: what targets exist and what kiln believes about each, so a user can
/// check a target file (and its validation errors) before spending hours tuning against it.
#pragma once
#include <string>

#include "targets/target.h"

namespace kiln {

/// A table of every target in targets_dir(): name, triple, cpu, vector bits, cores; the host's
/// target is marked with '*'.
std::string format_target_table();

/// Every field of one target, one per line.
std::string format_target(const Target& t);

}  // namespace kiln
