#!/usr/bin/env bash
# bench/gpu/device_run.sh PHASE...: the CUDA checks and benchmarks of issue 21 on a GPU host, run from
# the repository root there (the session's `device` tool). kiln itself runs there, carried as
# .gpu/kiln.tar.xz (bench/gpu/pack.sh: a kiln linked with KILN_LLVM_STATIC plus its shared libraries),
# so every package is compiled, linked and run on the GPU host exactly as a user's would be.
# Phases: node (compiled conformance of ONNX's node tests, .gpu/onnx-node.tar.xz), models (compiled
# conformance of .gpu/models.tar.xz), bench (bench/gpu/bench_gpu.py). Logs go to $OUT (or /tmp/gpu-out).
set -uo pipefail
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out" /tmp/k
tar xJf .gpu/kiln.tar.xz -C /tmp/k
export LD_LIBRARY_PATH=/tmp/k/kiln/lib KILN_TARGETS_DIR=$PWD/targets
kiln=/tmp/k/kiln/bin/kiln
target=${KILN_GPU_TARGET:-cuda-sm90}
nvidia-smi -L
cc --version | head -1
"$kiln" targets | grep cuda

# Compiled conformance of DIR in $shards shards, 16 at once (cases by position, so the shards are even).
conformance() {  # NAME DIR ARGS...
  local name=$1 dir=$2 shards=${SHARDS:-16}
  shift 2
  # $KILN_PHASE_LIMIT seconds at most (a device call has a time limit): shards cut off report nothing,
  # so the node tests run in small shards (16 shards of about 113 cases finished none in 250 s).
  seq 0 $((shards - 1)) | timeout "${KILN_PHASE_LIMIT:-100000}" xargs -P 16 -I{} sh -c \
    "'$kiln' conformance '$dir' --engine compiled --target $target --shard {}/$shards $* > /tmp/$name-{}.log 2>&1"
  cat /tmp/$name-*.log > "$out/$name.log"
  grep -h "passed," /tmp/$name-*.log | awk '{p+=$1; f+=$3; u+=$5; n+=1} END {printf "'"$name"' %s: %d passed, %d failed, %d unsupported (%d of '"$shards"' shards finished)\n", "'"$target"'", p, f, u, n}' |
    tee -a "$out/summary.txt"
}

for phase in "$@"; do
  start=$(date +%s)
  case $phase in
    node)
      tar xJf .gpu/onnx-node.tar.xz -C /tmp
      SHARDS=128 conformance node /tmp/onnx-node --known-failures tests/conformance/known_failures.txt ;;
    models)
      mkdir -p /tmp/models && tar xJf .gpu/models.tar.xz -C /tmp/models
      # Tolerances as tests/conformance/CMakeLists.txt gives them (fp16 references were computed in fp16).
      conformance models /tmp/models/models --rtol 1e-3 --atol 1e-4 --filter "'^(?!.*fp16)'"
      conformance models-fp16 /tmp/models/models --rtol 5e-2 --atol 2e-3 --filter fp16 ;;
    bench)
      python3 bench/gpu/bench_gpu.py --kiln "$kiln" --target "$target" --out "$out/bench.txt" ;;
    *) echo "device_run.sh: unknown phase $phase" >&2; exit 2 ;;
  esac
  echo "phase $phase: $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
done
