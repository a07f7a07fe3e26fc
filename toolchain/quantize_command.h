/// \file `kiln quantize MODEL -o OUT.onnx`: post-training static quantization of a float model into
/// QDQ form (frontend/quantize/quantize_model.h), calibrated on sample inputs: ONNX test-data
/// directories (`--data`, input_N.pb in graph-input order) and/or seeded ones (`--samples`, the
/// inputs `kiln run --seed` makes). Kept out of main.cc like `kiln subst`.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "toolchain/cli_bindings.h"

namespace kiln {

class QuantizeCommand {
 public:
  explicit QuantizeCommand(CLI::App& app);
  /// 0 when the model was written; -1 when `quantize` was not given. Throws Error for bad input.
  int run();

 private:
  CLI::App* cmd_;
  std::string model_, out_, activations_ = "uint8";
  std::vector<std::string> data_;
  int samples_ = -1;  // -1: 8 when no --data is given, else none
  uint64_t seed_ = 0;
  bool per_channel_ = false, reduce_range_ = false, expose_codes_ = false;
  BindingArgs bindings_;
};

}  // namespace kiln
