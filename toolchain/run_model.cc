#include "toolchain/run_model.h"

#include <fmt/format.h>

#include <filesystem>
#include <random>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/reference/interpreter.h"
#include "targets/target.h"
#include "toolchain/run_package.h"
#include "toolchain/npy.h"
#include "toolchain/pipeline.h"

namespace kiln {

Tensor seeded_input(const Value& v, uint64_t seed, size_t input_index) {
  std::mt19937_64 rng(seed * 1000003u + input_index);
  Tensor t(v.dtype, v.shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    uint64_t bits = rng();
    if (is_float(v.dtype)) t.set_double(i, -1.0 + 2.0 * static_cast<double>(bits >> 11) * 0x1.0p-53);
    else if (v.dtype == DType::Bool) t.set_int(i, static_cast<int64_t>(bits & 1));
    else t.set_int(i, static_cast<int64_t>(bits % 10));
  }
  return t;
}

namespace {

// A run-time-sized output (`counts`, as Graph::count_outputs) keeps its counted entries.
void print_outputs(const std::vector<std::string>& names, std::vector<Tensor> outs,
                   const std::map<std::string, RunTimeExtent>& counts, const RunOptions& o, std::ostream& out) {
  keep_counted_entries(names, counts, outs);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    out << fmt::format("output {} {} [{}]", names[i], dtype_name(t.dtype()), shape_str(t.shape())) << "\n ";
    int64_t n = std::min<int64_t>(t.size(), o.print_limit);
    for (int64_t k = 0; k < n; ++k)
      out << " " << (is_float(t.dtype()) ? fmt::format("{:.6g}", t.get_double(k)) : std::to_string(t.get_int(k)));
    if (t.size() > n) out << " ... (" << t.size() << " values)";
    out << "\n";
    if (!o.output_dir.empty()) {
      std::filesystem::create_directories(o.output_dir);
      save_tensor_file(o.output_dir + "/output_" + std::to_string(i) + ".pb", t, names[i]);
    }
  }
}

// A name given with --input that the model does not have is a typo, not something to ignore while
// the run goes on with seeded values.
void check_input_names(const std::map<std::string, std::string>& files, const std::vector<std::string>& names,
                       const std::string& what) {
  for (const auto& [name, file] : files)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      throw Error("--input names '" + name + "', which is not an input of " + what + " (inputs: " + list + ")");
    }
}

// --save-inputs: the inputs a run used, as input_N.pb in the order of `names`.
void save_inputs(const std::string& dir, const std::vector<std::string>& names, const std::map<std::string, Tensor>& inputs) {
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < names.size(); ++i)
    save_tensor_file(dir + "/input_" + std::to_string(i) + ".pb", inputs.at(names[i]), names[i]);
}

// --input NAME=SPEC: a TensorProto or NumPy file, or, when no file has that name, literal numbers
// ("16000", "1,2,3").
std::vector<double> literal_values(const std::string& name, const std::string& spec) {
  try {
    return parse_frozen_value(name + "=" + spec).second;
  } catch (const Error&) {
    throw Error("--input " + name + "=" + spec + ": no such file, and not a list of numbers");
  }
}

// The target a package was compiled for: by name from the targets directory, or, for a target given as
// a file of one's own (not in that directory), from that file where it still is.
CompileTarget package_target(const PackageSignature& sig) {
  std::error_code ec;
  const bool shipped = std::filesystem::exists(std::filesystem::path(targets_dir()) / (sig.target + ".toml"), ec);
  if (!shipped && !sig.target_file.empty() && std::filesystem::is_regular_file(sig.target_file, ec))
    return resolve_target(sig.target_file);
  return resolve_target(sig.target);
}

void run_package_dir(const std::string& dir, const RunOptions& o, std::ostream& out) {
  PackageSignature sig = read_package_signature(dir);
  std::vector<std::string> input_names;
  for (const auto& io : sig.inputs) input_names.push_back(io.name);
  check_input_names(o.input_files, input_names, dir);
  std::map<std::string, Tensor> inputs;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const auto& io = sig.inputs[i];
    auto f = o.input_files.find(io.name);
    if (f != o.input_files.end()) {
      if (std::filesystem::exists(f->second)) {
        inputs[io.name] = load_tensor_any(f->second);
      } else {
        const std::vector<double> values = literal_values(io.name, f->second);
        if (static_cast<int64_t>(values.size()) != num_elements(io.shape))
          throw Error("--input " + io.name + "=" + f->second + ": " + std::to_string(values.size()) +
                      " values for an input of shape " + shape_str(io.shape));
        inputs[io.name] = Tensor::from_doubles(io.dtype, io.shape, values);
      }
    } else {
      Value v;
      v.dtype = io.dtype;
      v.shape = io.shape;
      inputs[io.name] = seeded_input(v, o.seed, i);
    }
    if (inputs[io.name].dtype() != io.dtype || inputs[io.name].shape() != io.shape)
      throw Error(dir + ": input '" + io.name + "' must be " + dtype_name(io.dtype) + " " + shape_str(io.shape));
  }
  save_inputs(o.inputs_dir, input_names, inputs);
  PackageRun r = run_package(dir, package_target(sig), inputs, std::max(1, o.repeat), o.threads);
  std::vector<std::string> names;
  std::map<std::string, RunTimeExtent> counts;
  for (const auto& io : sig.outputs) {
    names.push_back(io.name);
    if (!io.count.empty()) counts[io.name] = {io.count_axis, io.count, ""};
  }
  print_outputs(names, r.outputs, counts, o, out);
  if (r.instructions) {
    // QEMU's time means nothing for a microcontroller; its instruction count does (docs/cortex-m.md).
    out << fmt::format("instructions: {:.0f} per run (QEMU -icount, median of {}; fewest {:.0f}); stack {} bytes\n",
                       *r.instructions, std::max(1, o.repeat), r.min_instructions.value_or(0), r.stack_bytes.value_or(0));
  } else {
    out << fmt::format("median: {:.3f} ms over {} run(s), min {:.3f} ms\n", r.median_ms, std::max(1, o.repeat), r.min_ms);
  }
}

}  // namespace

void run_model(const std::string& path, const RunOptions& o, std::ostream& out) {
  if (std::filesystem::is_directory(path)) return run_package_dir(path, o, out);
  if (o.engine != "reference") throw Error("--engine " + o.engine + " is not available yet (only 'reference')");
  if (o.threads != 1) throw Error("--threads applies to compiled package directories, not to model files");
  PipelineOptions po;
  po.bindings = o.bindings;
  // A name that is no graph input fails in bind_input_shapes, which names it.
  std::map<std::string, Tensor> given;
  const Graph declared = o.input_files.empty() ? Graph{} : import_onnx_file(path);
  for (const auto& [name, file] : o.input_files) {
    // A literal takes the input's declared (or bound) shape; a name that is no graph input fails in
    // bind_input_shapes, which names it, so it is only read here when it is a file.
    given[name] = std::filesystem::exists(file) || !declared.declared_input_dims.count(name)
                      ? load_tensor_any(file)
                      : literal_input(declared, name, literal_values(name, file), po.bindings, "--input");
    po.bindings.input_shapes[name] = given[name].shape();
  }
  Graph g = load_model(path, po);
  std::map<std::string, Tensor> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const std::string& name = g.inputs[i];
    auto it = given.find(name);
    inputs[name] = it != given.end() ? it->second : seeded_input(g.value(name), o.seed, i);
  }
  // Frozen inputs are inputs of the run too: saved with the rest, in the model's input order, so
  // another runtime can be given the same case.
  if (!po.bindings.frozen_values.empty() && !o.inputs_dir.empty()) {
    const Graph model = import_onnx_file(path);
    std::map<std::string, Tensor> saved = frozen_inputs(model, po.bindings);
    saved.insert(inputs.begin(), inputs.end());
    save_inputs(o.inputs_dir, model.inputs, saved);
  } else {
    save_inputs(o.inputs_dir, g.inputs, inputs);
  }
  print_outputs(g.outputs, run_reference(g, inputs), g.count_outputs, o, out);
}

}  // namespace kiln
