// Writes a fuzzer's seed corpus. `make_seeds DIR`: small models from kiln's own builder, covering raw
// and typed initializers, attributes of every kind, symbolic dimensions and several dtypes (the
// importer's; one with If branches). `make_seeds DIR tensors`: .npy and TensorProto files of several dtypes and ranks, each
// behind the selector byte of fuzz_tensor_files.cc (0: .npy, 1: TensorProto). `make_seeds DIR rpc`:
// what a client sends an RPC server or tracker: a preamble, then frames of every message it decodes.
// `make_seeds DIR sessions`: for fuzz_rpc_sessions.cc's four handlers (the selector byte first), a
// client's preamble and HELLO, a tuner's REQUEST, STATUS and RELEASE, a server's REGISTER and
// heartbeats. `make_seeds DIR records`: record lines of random programs for every task of record_tasks.h, each
// behind its task's selector byte, and a default-schedule record.
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/zoo/zoo.h"
#include "backends/measure/records.h"
#include "runtime/rpc/protocol.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "tests/fuzz/record_tasks.h"
#include "targets/target.h"
#include "toolchain/npy.h"

using namespace kiln;

namespace {

// Rewrites `path` with `selector` in front of its bytes.
void prefix(const std::string& path, char selector) {
  std::stringstream ss;
  ss << std::ifstream(path, std::ios::binary).rdbuf();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << selector << ss.str();
}

int tensor_seeds(const std::string& dir) {
  using D = std::vector<double>;
  using I = std::vector<int64_t>;
  const std::vector<Tensor> tensors = {
      Tensor::from_doubles(DType::Float32, {2, 3}, D{1, -2, 3.5, 0, 1e-3, 7}),
      Tensor::from_doubles(DType::Float16, {4}, D{0.5, 1, 2, -4}),
      Tensor::from_doubles(DType::Float64, {}, D{3.25}),
      Tensor::from_ints(DType::Int64, {1, 2, 2}, I{1, -2, 3, 4}),
      Tensor::from_ints(DType::UInt8, {3}, I{0, 128, 255}),
      Tensor::from_ints(DType::Bool, {2}, I{0, 1}),
      Tensor(DType::Float32, Shape{0, 5}),
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string npy = dir + "/t" + std::to_string(i) + ".npy", pb = dir + "/t" + std::to_string(i) + ".pb";
    save_npy(npy, tensors[i]);
    prefix(npy, 0);
    save_tensor_file(pb, tensors[i], "x" + std::to_string(i));
    prefix(pb, 1);
  }
  return 0;
}

// Writes `path`: the selector byte (when given), a client preamble (when asked), then `frames` through
// the protocol's own writers (the file is an fd like a socket).
bool write_frames(const std::string& path, std::optional<uint8_t> selector, bool preamble,
                  const std::vector<std::pair<rpc::MsgType, rpc::Writer>>& frames) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  if (selector) std::fputc(*selector, f);
  std::fflush(f);
  const int fd = fileno(f);
  bool ok = !preamble || rpc::write_preamble(fd, static_cast<uint16_t>(rpc::Role::kClient), 1000).ok();
  for (const auto& [type, body] : frames) ok = ok && rpc::write_frame(fd, type, body.bytes(), 1000).ok();
  std::fclose(f);
  return ok;
}

// One seed per message a server or tracker decodes: a client preamble, then the frame.
int rpc_seeds(const std::string& dir) {
  using namespace kiln::rpc;
  auto seed = [&](const std::string& name, MsgType type, const Writer& body) {
    return write_frames(dir + "/" + name, std::nullopt, true, {{type, body}});
  };
  RunSpec spec;
  spec.func = "kiln_program";
  spec.buffers = {{64, kiln::rpc::DType::kF32, true, false}, {32, kiln::rpc::DType::kF32, false, true}};
  spec.number = 3;
  spec.repeat = 2;
  Writer run, info, outcome, status, upload;
  encode_run_spec(run, spec);
  encode_server_info(info, ServerInfo{"x86_64", "host", 1000, 1 << 20, 5000});
  RunOutcome o;
  o.costs = {1e-3, 2e-3};
  o.outputs = {{1, std::vector<uint8_t>(32, 7)}};
  encode_run_outcome(outcome, o);
  encode_status(status, {{"host", 2, 1, 0}});
  upload.str("candidate.so");
  bool ok = seed("run", MsgType::kRun, run) && seed("welcome", MsgType::kWelcome, info) &&
            seed("result", MsgType::kResult, outcome) && seed("status", MsgType::kStatusReply, status) &&
            seed("upload", MsgType::kUpload, upload);
  return ok ? 0 : 1;
}

// Four random programs per task (fewer where sampling fails), as the tuner would have recorded them.
int record_seeds(const std::string& dir) {
  const std::vector<Task> tasks = fuzz::record_tasks();
  const Target target = host_target();
  measure::MeasureResult result;
  result.costs = {1e-4, 1.1e-4};
  int written = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const state::State initial(std::make_shared<const te::ComputeDAG>(tasks[i].dag));
    const std::vector<state::State> sketches = sketch::generate_sketches(initial, sketch::SearchParams{});
    sketch::Rng rng(i);
    for (int k = 0; k < 4; ++k) {
      std::string line;
      try {
        line = measure::record_line(tasks[i].key, target, sketch::sample_program(sketches, {}, rng), result);
      } catch (const Error&) {
        continue;
      }
      std::ofstream(dir + "/task" + std::to_string(i) + "_" + std::to_string(k), std::ios::binary)
          << static_cast<char>(i) << line;
      ++written;
    }
  }
  std::ofstream(dir + "/default", std::ios::binary)
      << '\0' << measure::record_line(tasks[0].key, target, state::State(std::make_shared<const te::ComputeDAG>(tasks[0].dag)), result, true);
  return written > 0 ? 0 : 1;
}

int session_seeds(const std::string& dir) {
  using namespace kiln::rpc;
  auto seed = [&](const std::string& name, uint8_t mode, bool preamble, const std::vector<std::pair<MsgType, Writer>>& frames) {
    return write_frames(dir + "/" + name, mode, preamble, frames);
  };
  Writer hello, request, status, release, reg, heartbeat;
  hello.str("fuzz");
  const std::vector<uint8_t> zeros(kNonceBytes + kProofBytes, 0);
  hello.raw(zeros.data(), zeros.size());
  request.u32(1);
  request.str("host");
  request.i32(0);
  release.u64(1);
  reg.str("host");
  reg.str("");
  reg.u16(9090);
  bool ok = seed("hello", 0, true, {{MsgType::kHello, hello}}) && seed("hello_keyed", 1, true, {{MsgType::kHello, hello}}) &&
            seed("tuner", 2, false, {{MsgType::kRequest, request}, {MsgType::kStatus, status}, {MsgType::kRelease, release}}) &&
            seed("server", 3, false, {{MsgType::kRegister, reg}, {MsgType::kHeartbeat, heartbeat}, {MsgType::kHeartbeat, heartbeat}});
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc == 3 ? argv[2] : "";
  if (argc < 2 || argc > 3 || (argc == 3 && kind != "tensors" && kind != "rpc" && kind != "records" && kind != "sessions")) {
    std::fprintf(stderr, "usage: make_seeds DIR [tensors|rpc|records|sessions]\n");
    return 2;
  }
  std::string dir = argv[1];
  if (kind == "tensors") return tensor_seeds(dir);
  if (kind == "rpc") return rpc_seeds(dir);
  if (kind == "records") return record_seeds(dir);
  if (kind == "sessions") return session_seeds(dir);
  build_zoo_model("tiny_cnn", ZooOptions{}).save(dir + "/tiny_cnn.onnx");

  ModelBuilder b("seed_attrs", 13);
  b.input("x", DType::Float32, std::vector<Dim>{{-1, "batch"}, {4, ""}});
  b.input("i", DType::Int64, Shape{2});
  b.initializer("w", Tensor::from_doubles(DType::Float32, {4, 3}, std::vector<double>(12, 0.5)));
  b.initializer("shape", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{-1, 3}));
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Reshape", {"y", "shape"}, {"z"});
  b.node("Transpose", {"z"}, {"t"}).attr("perm", std::vector<int64_t>{1, 0});
  b.node("Cast", {"i"}, {"f"}).attr("to", int64_t{1});
  b.node("LeakyRelu", {"t"}, {"r"}).attr("alpha", 0.1);
  b.node("Resize", {"r", "", "s"}, {"q"}).attr("mode", std::string("linear"));
  b.initializer("s", Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{1.0, 2.0}));
  b.output("q", DType::Float32, Shape{3, 2});
  b.output("f", DType::Float32, Shape{2});
  b.save(dir + "/attrs.onnx");

  ModelBuilder h("seed_half", 11, 6);
  h.input("x", DType::Float16, Shape{1, 8});
  h.initializer("c", Tensor::from_doubles(DType::Float16, {1, 8}, std::vector<double>(8, 0.25)));
  h.node("Add", {"x", "c"}, {"y"});
  h.output("y", DType::Float16, Shape{1, 8});
  h.save(dir + "/half.onnx");

  // An If on a shape, its then-branch holding a nested If that reads the outer branch's value: the
  // importer's subgraphs, their outer-scope reads and its ordering by them.
  ModelBuilder inner("inner");
  inner.node("Neg", {"u"}, {"v"});
  inner.output("v", DType::Float32, Shape{});
  ModelBuilder then_branch("then");
  then_branch.initializer("yes", Tensor::scalar_int(DType::Bool, 1));
  then_branch.node("Abs", {"x"}, {"u"});
  then_branch.node("If", {"yes"}, {"w"}).attr("then_branch", inner).attr("else_branch", inner);
  then_branch.output("w", DType::Float32, Shape{});
  ModelBuilder else_branch("else");
  else_branch.node("Relu", {"x"}, {"e"});
  else_branch.output("e", DType::Float32, Shape{});
  ModelBuilder c("seed_if", 13);
  c.input("x", DType::Float32, std::vector<Dim>{{-1, "batch"}, {4, ""}});
  c.initializer("zero", Tensor::scalar_int(DType::Int64, 0));
  c.initializer("one", Tensor::scalar_int(DType::Int64, 1));
  c.node("Shape", {"x"}, {"s"});
  c.node("Gather", {"s", "zero"}, {"n"});
  c.node("Equal", {"n", "one"}, {"cond"});
  c.node("If", {"cond"}, {"y"}).attr("then_branch", then_branch).attr("else_branch", else_branch);
  c.output("y", DType::Float32, Shape{});
  c.save(dir + "/if.onnx");

  // A Loop (trip count, condition, a carried value and a scan output) and a Scan (a state and a
  // reversed scan input): bodies with declared inputs, read by position.
  ModelBuilder body("body");
  body.input("i", DType::Int64, Shape{});
  body.input("go", DType::Bool, Shape{});
  body.input("acc", DType::Float32, Shape{4});
  body.node("Add", {"acc", "x"}, {"next"});
  body.node("Identity", {"go"}, {"go_out"});
  body.node("Identity", {"next"}, {"row"});
  body.output("go_out", DType::Bool, Shape{});
  body.output("next", DType::Float32, Shape{4});
  body.output("row", DType::Float32, Shape{4});
  ModelBuilder l("seed_loop", 13);
  l.input("x", DType::Float32, Shape{4});
  l.initializer("trips", Tensor::scalar_int(DType::Int64, 3));
  l.initializer("go", Tensor::scalar_int(DType::Bool, 1));
  l.node("Loop", {"trips", "go", "x"}, {"final", "rows"}).attr("body", body);
  l.output("final", DType::Float32, Shape{4});
  l.output("rows", DType::Float32, Shape{3, 4});
  l.save(dir + "/loop.onnx");

  ModelBuilder scan_body("scan_body");
  scan_body.input("sum", DType::Float32, Shape{4});
  scan_body.input("row", DType::Float32, Shape{4});
  scan_body.node("Add", {"sum", "row"}, {"sum_out"});
  scan_body.output("sum_out", DType::Float32, Shape{4});
  ModelBuilder sc("seed_scan", 13);
  sc.input("init", DType::Float32, Shape{4});
  sc.input("xs", DType::Float32, Shape{5, 4});
  sc.node("Scan", {"init", "xs"}, {"total"})
      .attr("body", scan_body)
      .attr("num_scan_inputs", int64_t{1})
      .attr("scan_input_directions", std::vector<int64_t>{1});
  sc.output("total", DType::Float32, Shape{4});
  sc.save(dir + "/scan.onnx");
  return 0;
}
