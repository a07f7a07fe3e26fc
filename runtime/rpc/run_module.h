/// \file Running one candidate on the device: load the uploaded shared object in a child process, fill
/// its inputs, time it, and report costs and outputs.
///
/// Candidates come from a search and may crash, hang or scribble over memory. Running each in a forked
/// child that the server waits on with a deadline is what keeps one bad candidate from taking the
/// server (and every other session) down.
#pragma once
#include <string>

#include "runtime/rpc/protocol.h"

namespace kiln::rpc {

/// Runs `spec.func` from the shared object at `so_path` in a child process: dlopen, fill inputs with
/// fill_random(seed), one untimed call, then `repeat` timed repeats of `number` calls (number grows
/// until a repeat lasts min_repeat_ms), flushing the buffers from the caches before each repeat when
/// asked. The kernel is called as `void func(void** buffers, void* parallel)` with parallel = NULL when
/// spec.threads is 1, else a kiln_pthread pool of that many threads (runtime/kiln_parallel_pthread.h).
/// When spec.slow_call_ms > 0 and the untimed call took longer, that call's time is the only cost (a
/// tuner's hopeless candidates then cost one call instead of all repeats). A crash, signal, dlopen or dlsym failure gives kRuntimeDevice; a child still running after
/// spec.run_timeout_ms is killed and gives kRunTimeout. Never throws.
RunOutcome run_in_child(const std::string& so_path, const RunSpec& spec);

}  // namespace kiln::rpc
