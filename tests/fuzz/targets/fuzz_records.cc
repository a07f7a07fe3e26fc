// libFuzzer target for tuning records, which `kiln compile --records` and a resumed `kiln tune` read
// from files a user may have been handed: the first byte picks a task (record_tasks.h), the rest is one
// record line. A line must end in a kiln::Error, or decode and then replay onto the task's DAG, lower
// and pass or fail the bounds check -- never crash, hang, leak or allocate what its size does not justify.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "backends/measure/records.h"
#include "frontend/ir/error.h"
#include "scheduler/lower/bounds_check.h"
#include "scheduler/lower/lower_state.h"
#include "tests/fuzz/record_tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<kiln::Task> tasks = kiln::fuzz::record_tasks();
  if (size == 0) return 0;
  const kiln::Task& task = tasks[data[0] % tasks.size()];
  const std::string line(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const kiln::measure::Record r = kiln::measure::parse_record(line);
    const kiln::state::State s = kiln::measure::replay_record(r, std::make_shared<const kiln::te::ComputeDAG>(task.dag));
    const kiln::lower::LoweredFunc f = kiln::lower::lower_state_func(s, "fuzz");
    (void)kiln::lower::first_out_of_bounds(f.body);
  } catch (const kiln::Error&) {
  } catch (const std::bad_alloc&) {
  }
  return 0;
}
