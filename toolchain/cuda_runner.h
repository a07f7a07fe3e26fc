/// \file The harness that runs a CUDA package (`kiln run`, compiled conformance, tests): what a user's
/// program does with the package, in C. It takes the first GPU's primary context and a stream,
/// allocates the device arena and the inputs and outputs with cuMemAlloc, copies the raw inputs in,
/// runs the model once untimed and then `repeat` times between CUDA events, and writes the raw outputs.
#pragma once
#include <string>

#include "toolchain/run_package.h"

namespace kiln {

/// C source of the runner for the package `sig` (built with the package's header on the include path
/// and linked with lib<m>.a and -lcuda). Usage: runner REPEAT inputs... outputs...; prints
/// "median: X ms" and "min: Y ms" (GPU time of one run, from CUDA events). A driver error exits with
/// 3 and names the call and its CUresult ("no CUDA device" where there is none).
std::string cuda_runner_source(const PackageSignature& sig);

}  // namespace kiln
