// The CUDA back end (backends/cuda): a model's GPU program becomes PTX with one entry point per kernel
// and a cubin that ptxas assembled, for sm_80 and sm_90; ptxas errors name ptxas and the GPU; and, on
// a machine with a GPU, a compiled package computes what the reference interpreter computes. Where
// ptxas or a GPU is missing the tests that need them skip, saying which.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/cuda/cuda_module.h"
#include "backends/cuda/cuda_toolkit.h"
#include "frontend/ir/error.h"
#include "frontend/partition/partition.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/lower/lower_gpu.h"
#include "targets/target.h"
#include "tests/frontend/partition/partition_models.h"
#include "toolchain/compile_target.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_package.h"
#include "toolchain/temp_dir.h"

namespace kiln {
namespace {

lower::ModelProgram gpu_program(const Graph& g) {
  lower::GpuScheduleParams p;
  lower::ModelProgram prog = lower::lower_model(g, partition_graph(g), "m_kernel", lower::gpu_subgraph_scheduler(p));
  prog.func.body = lower::gpu_kernels_only(prog.func.body, p);
  return prog;
}

TEST(CudaModule, KernelsAssembleForSm80AndSm90) {
  if (!cuda::have_ptxas()) GTEST_SKIP() << "no ptxas at " << cuda::ptxas_path();
  Graph g = testing::load_built(testing::attention_model());
  lower::ModelProgram prog = gpu_program(g);
  for (const char* target : {"cuda-sm80", "cuda-sm90"}) {
    cuda::CudaProgram code = cuda::generate_cuda_program(prog.func, resolve_target(target).machine);
    ASSERT_FALSE(code.kernels.empty());
    size_t entries = 0;
    for (size_t at = code.ptx.find(".entry"); at != std::string::npos; at = code.ptx.find(".entry", at + 1)) ++entries;
    EXPECT_EQ(entries, code.kernels.size()) << target;
    for (const auto& k : code.kernels) {
      EXPECT_NE(code.ptx.find(".entry " + k.name + "("), std::string::npos) << k.name;
      EXPECT_GE(k.grid, 1);
      EXPECT_GE(k.block, 32);
    }
    ASSERT_GE(code.cubin.size(), 4u);
    EXPECT_EQ(code.cubin.substr(0, 4), "\x7f" "ELF") << target;  // a cubin is an ELF file
    EXPECT_EQ(code.arch, "sm_" + std::string(target).substr(7));
  }
}

TEST(CudaModule, PtxasErrorsNamePtxasAndTheGpu) {
  if (!cuda::have_ptxas()) GTEST_SKIP() << "no ptxas at " << cuda::ptxas_path();
  try {
    cuda::assemble_ptx(".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx\n", "sm_90");
    FAIL() << "ptxas accepted broken PTX";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ptxas"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm_90"), std::string::npos) << e.what();
  }
}

TEST(CudaModule, ACudaTargetHasGpuLimits) {
  CompileTarget t = resolve_target("cuda-sm90");
  ASSERT_TRUE(t.is_cuda());
  EXPECT_EQ(t.gpu->warp_size, 32);
  EXPECT_EQ(t.machine.triple, "nvptx64-nvidia-cuda");
  EXPECT_FALSE(resolve_target("x86_64-avx2").is_cuda());
}

TEST(CudaPackage, ComputesWhatTheReferenceComputesOnTheGpu) {
  if (!cuda::have_ptxas()) GTEST_SKIP() << "no ptxas at " << cuda::ptxas_path();
  if (!cuda::have_cuda_device()) GTEST_SKIP() << "no CUDA GPU on this machine: the package is built but not run";
  Graph g = testing::load_built(testing::attention_model());
  std::map<std::string, Tensor> inputs;
  for (const std::string& name : g.inputs) {
    const Value& v = g.value(name);
    Tensor t(v.dtype, v.shape);
    for (int64_t i = 0; i < t.size(); ++i) t.set_double(i, static_cast<double>((i * 37 % 101) - 50) / 50.0);
    inputs[name] = t;
  }
  CompileOptions c;
  c.target = resolve_target("cuda-sm90");
  TempDir dir("kiln-cuda-test");
  compile_graph(g, c, dir.path());
  PackageRun run = run_package(dir.path(), c.target, inputs, 3);
  std::vector<Tensor> want = run_reference(g, inputs);
  ASSERT_EQ(run.outputs.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    for (int64_t i = 0; i < want[o].size(); ++i) {
      const double ref = want[o].get_double(i);
      EXPECT_NEAR(run.outputs[o].get_double(i), ref, 1e-4 + 1e-4 * std::abs(ref)) << i;
    }
  }
}

}  // namespace
}  // namespace kiln
