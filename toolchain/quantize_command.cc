#include "toolchain/quantize_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/quantize/quantize_model.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_model.h"

namespace kiln {

QuantizeCommand::QuantizeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("quantize", "Quantize a float model to int8 (QDQ form), calibrated on sample inputs");
  cmd_->add_option("model", model_, "Float ONNX model")->required();
  cmd_->add_option("-o,--output", out_, "Quantized .onnx file to write")->required();
  cmd_->add_option("--data", data_,
                   "Calibration inputs: a directory of input_N.pb (graph-input order), or one holding test_data_set_* "
                   "directories (repeatable)");
  cmd_->add_option("--samples", samples_, "Seeded calibration inputs, as `kiln run --seed` makes them (default: 8 without --data)")
      ->check(CLI::Range(0, 100000));
  cmd_->add_option("--seed", seed_, "Seed of the first seeded sample (the next ones count up)")->capture_default_str();
  cmd_->add_option("--activations", activations_,
                   "Activation codes: uint8 or int8 (ONNX Runtime's x86 build runs int8-activation convs in float)")
      ->check(CLI::IsMember({"uint8", "int8"}))
      ->capture_default_str();
  cmd_->add_flag("--per-channel", per_channel_, "Weights: a scale per output channel (default: one per tensor)");
  cmd_->add_flag("--reduce-range", reduce_range_,
                 "7-bit codes, for x86 cores without VNNI (whose u8 x s8 pairs saturate at 16 bits)");
  cmd_->add_flag("--expose-codes", expose_codes_,
                 "Also output every quantized activation's int8 codes, to compare runtimes layer by layer");
  bindings_.add_to(cmd_);
}

namespace {

// The sample directories `--data DIR` names: DIR itself, or its test_data_set_* directories.
std::vector<std::string> sample_dirs(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error("--data " + dir + ": not a directory");
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path().string());
  std::sort(sets.begin(), sets.end());
  return sets.empty() ? std::vector<std::string>{dir} : sets;
}

std::map<std::string, Tensor> load_sample(const std::string& dir, const std::vector<std::string>& inputs) {
  std::map<std::string, Tensor> sample;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string file = dir + "/input_" + std::to_string(i) + ".pb";
    if (!std::filesystem::exists(file)) throw Error("--data " + dir + ": no " + file + " for input '" + inputs[i] + "'");
    sample[inputs[i]] = load_tensor_file(file);
  }
  return sample;
}

}  // namespace

int QuantizeCommand::run() {
  if (!cmd_->parsed()) return -1;
  QuantizeOptions o;
  o.activations = activations_ == "int8" ? DType::Int8 : DType::UInt8;
  o.per_channel = per_channel_;
  o.reduce_range = reduce_range_;
  o.expose_codes = expose_codes_;
  o.bindings = bindings_.parse();
  std::vector<std::map<std::string, Tensor>> samples;
  const Graph declared = import_onnx_file(model_);
  for (const std::string& d : data_)
    for (const std::string& set : sample_dirs(d)) samples.push_back(load_sample(set, declared.inputs));
  // The shapes of the given samples bind the model's inputs unless --input-shape does.
  if (!samples.empty())
    for (const auto& [name, t] : samples.front()) o.bindings.input_shapes.emplace(name, t.shape());
  const int seeded = samples_ >= 0 ? samples_ : (data_.empty() ? 8 : 0);
  if (seeded > 0) {
    PipelineOptions po;
    po.bindings = o.bindings;
    const Graph g = load_model(model_, po);
    for (int k = 0; k < seeded; ++k) {
      std::map<std::string, Tensor> sample;
      for (size_t i = 0; i < g.inputs.size(); ++i) sample[g.inputs[i]] = seeded_input(g.value(g.inputs[i]), seed_ + static_cast<uint64_t>(k), i);
      samples.push_back(std::move(sample));
    }
  }
  if (samples.empty()) throw Error("kiln quantize: no calibration samples (--data DIR or --samples N)");
  const QuantizeResult r = quantize_model(model_, o, samples);
  // Written beside the destination and renamed into place: a kill never leaves half a model there.
  const std::string partial = out_ + ".partial";
  {
    std::ofstream f(partial, std::ios::binary);
    if (!(f << r.model) || !f.flush()) throw Error(out_ + ": cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(partial, out_, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    throw Error(out_ + ": cannot write");
  }
  for (const std::string& line : r.log) std::cout << line << "\n";
  std::cout << "wrote " << out_ << " (" << samples.size() << " calibration samples)\n";
  return 0;
}

}  // namespace kiln
