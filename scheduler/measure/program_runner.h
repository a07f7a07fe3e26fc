/// \file The runner half of measurement: built candidates in, timed (and checked) results out. The
/// search holds a ProgramRunner, so it does not care whether programs run in a local child process
/// (backends/measure/local_runner.h) or on a board behind a tracker (backends/measure/rpc_runner.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/measure/measure.h"

namespace kiln::measure {

/// How candidates are timed. The knobs of TVM's time_evaluator: one untimed call, then `repeat` timed
/// repeats of `number` calls each, `number` growing until a repeat lasts min_repeat_ms.
struct RunnerOptions {
  int number = 1;
  int repeat = 3;
  int min_repeat_ms = 0;
  bool cache_flush = false;   ///< evict the buffers from the caches before each repeat
  double timeout_s = 10;      ///< per candidate run on the device (warm-up and repeats together)
  uint64_t seed = 0;          ///< inputs are fill_random(seed, buffer index): the same on every device
  int threads = 1;            ///< threads of the candidates' parallel loops (a pthread pool on the device)
  /// Compare every candidate's outputs with the default schedule's before its time counts. Off only
  /// for tests of the runner itself.
  bool check_outputs = true;
};

/// Runs built candidates and reports seconds per call for each repeat, or why not.
class ProgramRunner {
 public:
  virtual ~ProgramRunner() = default;
  /// One result per input, in input order; builds[i] is inputs[i]'s build. A candidate whose build
  /// failed keeps the build's error. A crash, hang, wrong answer or lost device is an error result,
  /// never a throw.
  virtual std::vector<MeasureResult> run(const std::vector<MeasureInput>& inputs,
                                         const std::vector<BuildResult>& builds) = 0;
};

/// Tolerances of the wrong-answer check: floats match when |a - b| <= atol + rtol * max(|b|, rms(b))
/// (NaN matches NaN), integers and bools must be equal. rms(b) is the root mean square of the
/// reference output's finite values: a float32 reduction's rounding error scales with the size of its
/// terms, not with its result, so an element that cancels to near zero in an output of large values
/// (a 1728-term convolution of uniform [-1, 1] data, ~14 typical, where two summation orders differ
/// by ~1e-4) would otherwise fail an element-relative check. A wrong index or a missing tap still
/// moves an element by about the typical magnitude.
struct OutputTolerance {
  double rtol = 1e-3;
  double atol = 1e-4;
};

/// Compares one output buffer of a candidate with the reference's. Returns "" when they match, else a
/// one-line reason naming `name`, the first differing element and both values.
std::string compare_output(const std::string& name, DType dtype, const std::vector<uint8_t>& got,
                           const std::vector<uint8_t>& want, const OutputTolerance& tol = {});

}  // namespace kiln::measure
