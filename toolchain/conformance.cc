#include "toolchain/conformance.h"

#include "frontend/ir/narrow_types.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/ir/narrow_types.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/te/lower_graph.h"
#include "scheduler/te/narrow_codes.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_package.h"
#include "toolchain/temp_dir.h"
#include <random>
#include "scheduler/te/te_eval.h"

namespace kiln {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> find_cases(const fs::path& dir) {
  std::vector<fs::path> cases;
  if (fs::exists(dir / "model.onnx")) return {dir};
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": not a directory");
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() == "model.onnx") cases.push_back(e.path().parent_path());
  std::sort(cases.begin(), cases.end());
  return cases;
}

// input_0.pb, input_1.pb, ... in numeric order.
std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && f.size() > prefix.size() + 3 && f.ends_with(".pb"))
      files.emplace_back(std::stoi(f.substr(prefix.size(), f.size() - prefix.size() - 3)), e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> out;
  for (auto& [i, p] : files) out.push_back(p);
  return out;
}

std::map<std::string, std::string> read_known_failures(const std::string& file) {
  std::map<std::string, std::string> known;
  if (file.empty()) return known;
  std::ifstream in(file);
  if (!in) throw Error(file + ": cannot open known-failures file");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.find_first_of(" \t");
    std::string name = line.substr(0, sp);
    std::string why = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", sp));
    known[name] = why;
  }
  return known;
}

double half_precision_rtol(DType t) {
  if (t == DType::Float16) return 2.0 / 1024;
  if (t == DType::BFloat16) return 2.0 / 128;
  return 0;
}

// Empty when equal within tolerance, else a description of the first mismatch.
std::string compare(const Tensor& got, const Tensor& want, const ConformanceOptions& o) {
  if (got.dtype() != want.dtype()) return "dtype " + dtype_name(got.dtype()) + ", expected " + dtype_name(want.dtype());
  if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + ", expected " + shape_str(want.shape());
  int64_t bad = 0;
  std::string first;
  double rtol = std::max(o.rtol, half_precision_rtol(want.dtype()));
  for (int64_t i = 0; i < want.size(); ++i) {
    bool ok;
    if (is_float(want.dtype()) || is_narrow_float(want.dtype())) {
      double g = got.get_double(i), w = want.get_double(i);
      if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
      else if (std::isinf(w) || std::isinf(g)) ok = g == w;
      else ok = std::fabs(g - w) <= o.atol + rtol * std::fabs(w);
      if (!ok && first.empty()) first = fmt::format("element {}: got {:.9g}, expected {:.9g}", i, g, w);
    } else {
      ok = got.get_int(i) == want.get_int(i);
      if (!ok && first.empty()) first = fmt::format("element {}: got {}, expected {}", i, got.get_int(i), want.get_int(i));
    }
    bad += !ok;
  }
  if (!bad) return "";
  return fmt::format("{} of {} elements differ; {}", bad, want.size(), first);
}

// The graph inputs that `value` is computed from (itself, if it is one).
std::set<std::string> graph_inputs_feeding(const Graph& g, const std::string& value) {
  std::set<std::string> wanted = {value}, found;
  for (auto n = g.nodes.rbegin(); n != g.nodes.rend(); ++n) {
    bool produces = false;
    for (const auto& o : n->outputs) produces |= !o.empty() && wanted.count(o);
    if (!produces) continue;
    for (const auto& in : n->inputs)
      if (!in.empty()) wanted.insert(in);
  }
  for (const auto& in : g.inputs)
    if (wanted.count(in)) found.insert(in);
  return found;
}

// Runs a prepared graph with the chosen engine.
std::vector<Tensor> run_engine(const ConformanceOptions& o, const Graph& g, const std::map<std::string, Tensor>& inputs) {
  const std::string& engine = o.engine;
  if (engine == "reference") return run_reference(g, inputs);
  if (engine == "compiled") {
    CompileOptions c;
    c.target = resolve_target(o.target);
    c.schedule = o.schedule;
    TempDir dir("kiln-conformance");
    PipelineOptions po;
    po.substitutions = o.substitutions;
    po.subst_min_gain = o.subst_min_gain;
    compile_graph(g, c, dir.path(), po);
    if (o.compile_only) return {};
    return run_package(dir.path(), c.target, inputs, 1).outputs;
  }
  // "te": the op lowerings' tensor expressions, evaluated directly.
  te::LoweredGraph lg = te::lower_graph(g);
  std::map<const te::TensorNode*, Tensor> bound;
  for (const auto& [name, t] : lg.inputs) bound[t.get()] = te::stored_tensor(inputs.at(name));
  std::vector<Tensor> outs = te::evaluate(lg.dag, bound);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Value& v = g.value(g.outputs.at(i));
    outs[i] = te::tensor_from_stored(outs[i], v.dtype, v.shape);
  }
  return outs;
}

}  // namespace

namespace {

ValueKind declared_kind(const Graph& g, const std::string& input) {
  auto c = g.composite_inputs.find(input);
  return c == g.composite_inputs.end() ? ValueKind::Tensor : c->second.kinds.front();
}

IoLayout layout_of(const IoValue& v) {
  IoLayout l;
  l.kind = v.kind;
  if (v.kind == ValueKind::Tensor) l.shape = v.tensor.shape();
  for (const IoValue& e : v.elements) l.elements.push_back(layout_of(e));
  return l;
}

}  // namespace

BoundTestData bind_test_data(const Graph& base, const std::filesystem::path& set, const std::vector<std::string>& freeze,
                             bool run_time_shapes) {
  Graph g = base;
  auto in_files = numbered_files(set, "input_");
  if (in_files.size() > g.inputs.size())
    throw Error(set.string() + ": " + std::to_string(in_files.size()) + " input files for " +
                std::to_string(g.inputs.size()) + " graph inputs");
  std::map<std::string, Tensor> inputs;
  std::map<std::string, IoValue> composite;  // sequence and optional inputs
  ShapeBindings b;
  for (size_t i = 0; i < in_files.size(); ++i) {
    std::string pb_name;
    IoValue v = load_value_file(in_files[i].string(), declared_kind(g, g.inputs[i]), &pb_name);
    const std::string& name = g.has_value(pb_name) && std::count(g.inputs.begin(), g.inputs.end(), pb_name)
                                  ? pb_name
                                  : g.inputs[i];
    if (declared_kind(g, name) != v.kind) v = load_value_file(in_files[i].string(), declared_kind(g, name));
    if (v.kind != ValueKind::Tensor) {
      b.composite[name] = layout_of(v);
      composite[name] = std::move(v);
      continue;
    }
    b.input_shapes[name] = v.tensor.shape();
    inputs[name] = std::move(v.tensor);
  }
  // An optional input the test data leaves out is an empty one.
  for (const std::string& name : g.inputs)
    if (!inputs.count(name) && !composite.count(name) && declared_kind(g, name) == ValueKind::Optional) {
      b.absent.insert(name);
      composite[name].kind = ValueKind::Optional;
    }
  if (inputs.size() + composite.size() != g.inputs.size())
    throw Unsupported(set.string() + ": test data leaves graph inputs unset (optional inputs are not supported)");
  for (const std::string& name : freeze) {
    if (!inputs.count(name)) throw Error(set.string() + ": --freeze " + name + ": the test data has no input of that name");
    b.frozen[name] = inputs.at(name);
    b.input_shapes.erase(name);
  }
  // Inputs that shapes depend on are frozen to their test values, as a user would with --freeze.
  Graph unbound = g;
  unbound.run_time_shapes = run_time_shapes;
  for (;;) {
    g = unbound;
    bind_input_shapes(g, b);
    for (const auto& [name, v] : composite) {  // the tensors a sequence or optional holds, as inputs
      std::vector<Tensor> tensors = tensors_of(v);
      for (size_t k = 0; k < tensors.size(); ++k) inputs[g.io_parts.at(name).at(k)] = tensors[k];
    }
    for (const auto& [name, t] : inputs)
      if (!b.frozen.count(name) && t.dtype() != g.value(name).dtype)
        throw Error(set.string() + ": input '" + name + "' is " + dtype_name(t.dtype()) + ", model declares " +
                    dtype_name(g.value(name).dtype));
    try {
      infer_shapes(g);
      break;
    } catch (const NotConstant& e) {
      bool froze = false;
      // Traced in the graph inference stopped in: it holds the nodes of the Ifs it inlined.
      for (const std::string& name : graph_inputs_feeding(g, e.value_name())) {
        if (b.frozen.count(name) || !inputs.count(name)) continue;
        b.frozen[name] = inputs.at(name);
        b.input_shapes.erase(name);
        froze = true;
      }
      if (!froze) throw;
    }
  }
  for (const auto& [name, t] : b.frozen) inputs.erase(name);
  return {std::move(g), std::move(inputs)};
}

namespace {

enum class Outcome { Pass, Fail, Unsupported };

Outcome run_case(const fs::path& dir, const ConformanceOptions& o, std::string& why) {
  try {
    Graph base = import_onnx_file((dir / "model.onnx").string());
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) throw Error(dir.string() + ": no test_data_set_* directory");
    // GPU programs have no runtime kernels: their run-time-shaped ops get their inputs frozen.
    const bool gpu = o.engine == "compiled" && (resolve_target(o.target).is_cuda() ||
                                               o.schedule.kind == ScheduleChoice::Kind::GpuSerial ||
                                               o.schedule.kind == ScheduleChoice::Kind::GpuSerialRandom);
    for (const fs::path& set : sets) {
      BoundTestData bound = bind_test_data(base, set, o.freeze, !gpu);
      const Graph& g = bound.graph;
      const std::map<std::string, Tensor>& inputs = bound.inputs;
      std::vector<Tensor> outs = run_engine(o, g, inputs);
      if (o.compile_only) continue;  // the package was built; nothing ran
      auto out_files = numbered_files(set, "output_");
      const std::vector<std::string>& declared = g.model_outputs.empty() ? g.outputs : g.model_outputs;
      if (out_files.size() != declared.size())
        throw Error(set.string() + ": " + std::to_string(out_files.size()) + " output files for " +
                    std::to_string(declared.size()) + " graph outputs");
      // A run-time-sized output keeps the entries its count output says.
      keep_counted_entries(g.outputs, g.count_outputs, outs);
      size_t at = 0;  // the first of outs that output i gives
      for (size_t i = 0; i < declared.size(); ++i) {
        auto parts = g.io_parts.find(declared[i]);
        const ValueKind kind = parts == g.io_parts.end() ? ValueKind::Tensor : g.value(declared[i]).kind;
        std::vector<Tensor> want = tensors_of(load_value_file(out_files[i].string(), kind));
        const size_t count = parts == g.io_parts.end() ? 1 : parts->second.size();
        std::string diff;
        if (want.size() != count)
          diff = "the model gives " + std::to_string(count) + " tensors, the test data " + std::to_string(want.size());
        for (size_t k = 0; diff.empty() && k < count; ++k) diff = compare(outs.at(at + k), want[k], o);
        if (!diff.empty()) {
          why = set.filename().string() + " output " + std::to_string(i) + " ('" + declared[i] + "'): " + diff;
          return Outcome::Fail;
        }
        at += count;
      }
    }
    return Outcome::Pass;
  } catch (const Unsupported& e) {
    why = e.what();
    return Outcome::Unsupported;
  } catch (const std::exception& e) {
    why = e.what();
    return Outcome::Fail;
  }
}

}  // namespace

ConformanceResult run_conformance(const std::string& dir, const ConformanceOptions& o, std::ostream& out) {
  if (o.engine != "reference" && o.engine != "te" && o.engine != "compiled")
    throw Error("--engine " + o.engine + " is not available (reference, te, compiled)");
  if (o.engine == "compiled") resolve_target(o.target);  // a bad target fails once, up front
  if (o.compile_only && o.engine != "compiled") throw Error("--compile-only applies to --engine compiled");
  auto known = read_known_failures(o.known_failures_file);
  std::optional<std::regex> filter;
  if (!o.filter.empty()) filter.emplace(o.filter);
  ConformanceResult r;
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    throw Error("--shard must be K/N with 0 <= K < N");
  size_t position = 0;
  for (const fs::path& c : find_cases(dir)) {
    std::string name = c.filename().string();
    if (filter && !std::regex_search(name, *filter)) continue;
    if (static_cast<int>(position++ % static_cast<size_t>(o.shard_count)) != o.shard_index) continue;
    std::string why;
    Outcome oc = run_case(c, o, why);
    auto k = known.find(name);
    if (oc == Outcome::Fail && k != known.end()) {
      oc = Outcome::Unsupported;
      why = "known failure: " + k->second;
    } else if (oc == Outcome::Pass && k != known.end() && o.verbose) {
      out << "NOTE " << name << ": listed as a known failure but passes\n";
    }
    switch (oc) {
      case Outcome::Pass:
        ++r.passed;
        if (o.verbose) out << "PASS " << name << "\n";
        break;
      case Outcome::Fail:
        ++r.failed;
        out << "FAIL " << name << ": " << why << "\n";
        break;
      case Outcome::Unsupported:
        ++r.unsupported;
        if (o.verbose) out << "UNSUPPORTED " << name << ": " << why << "\n";
        break;
    }
    out.flush();
  }
  out << r.passed << " passed, " << r.failed << " failed, " << r.unsupported << " unsupported\n";
  return r;
}

}  // namespace kiln
