#!/usr/bin/env bash
# bench/gpu/device_run.sh PHASE...: the CUDA checks and benchmarks of issue 21 on a GPU host, run from
# the repository root there (the session's `device` tool). kiln itself runs there, carried as
# .gpu/kiln.tar.xz (bench/gpu/pack.sh: a kiln linked with KILN_LLVM_STATIC plus its shared libraries),
# so every package is compiled, linked and run on the GPU host exactly as a user's would be.
# Phases: node (compiled conformance of ONNX's node tests, .gpu/onnx-node.tar.xz), models (compiled
# conformance of .gpu/models.tar.xz), bench (bench/gpu/bench_gpu.py), tune (kiln tune over RPC on
# loopback, then tuned vs untuned), profile (per-kernel times with Nsight Compute). Logs go to $OUT (or /tmp/gpu-out).
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
# With $RUN_SHARDS < $shards (node: $NODE_SHARDS) only RUN_SHARDS shards run, from $FIRST_SHARD (node:
# $NODE_FIRST; default 0): an even sample of the cases, or the rest of them, for a device call too short
# for all of them.
conformance() {  # NAME DIR ARGS...
  local name=$1 dir=$2 shards=${SHARDS:-16}
  local run=${RUN_SHARDS:-$shards} first=${FIRST_SHARD:-0}
  shift 2
  # $KILN_PHASE_LIMIT seconds at most (a device call has a time limit): shards cut off report nothing,
  # so the node tests run in small shards (16 shards of about 113 cases finished none in 250 s).
  seq "$first" $((first + run - 1)) | timeout "${KILN_PHASE_LIMIT:-100000}" xargs -P 16 -I{} sh -c \
    "'$kiln' conformance '$dir' --engine compiled --target $target --shard {}/$shards $* > /tmp/$name-{}.log 2>&1"
  cat /tmp/$name-*.log > "$out/$name.log"
  grep -h "passed," /tmp/$name-*.log | awk '{p+=$1; f+=$3; u+=$5; n+=1} END {printf "'"$name"' %s: %d passed, %d failed, %d unsupported (%d of '"$run"' shards finished, of '"$shards"')\n", "'"$target"'", p, f, u, n}' |
    tee -a "$out/summary.txt"
}

for phase in "$@"; do
  start=$(date +%s)
  case $phase in
    node)
      tar xJf .gpu/onnx-node.tar.xz -C /tmp
      SHARDS=128 RUN_SHARDS=${NODE_SHARDS:-128} FIRST_SHARD=${NODE_FIRST:-0} conformance node /tmp/onnx-node --known-failures tests/conformance/known_failures.txt ;;
    models)
      mkdir -p /tmp/models && tar xJf .gpu/models.tar.xz -C /tmp/models
      # Tolerances as tests/conformance/CMakeLists.txt gives them (fp16 references were computed in fp16).
      conformance models /tmp/models/models --rtol 1e-3 --atol 1e-4 --filter "'^(?!.*fp16)'"
      conformance models-fp16 /tmp/models/models --rtol 5e-2 --atol 2e-3 --filter fp16 ;;
    bench)
      # $BENCH_ONLY: bench_gpu.py's --only (matmul,resnet50,bert_base,layers,prefetch,tuned); $KILN_BENCH_LIMIT seconds.
      timeout "${KILN_BENCH_LIMIT:-100000}" python3 bench/gpu/bench_gpu.py --kiln "$kiln" --target "$target" \
        --out "$out/bench.txt" ${BENCH_ONLY:+--only "$BENCH_ONLY"} ;;
    tune)
      # Issue 21: a tune over RPC on the GPU host (tracker, device server and tuner over loopback), each
      # model at most $KILN_TUNE_LIMIT seconds, then tuned vs untuned kiln vs cuBLAS / PyTorch.
      "$kiln" tracker --port 9190 > /tmp/tracker.log 2>&1 &
      sleep 1
      "$kiln" rpc-server --port 0 --tracker 127.0.0.1:9190 --key gpu > /tmp/server.log 2>&1 &
      sleep 2
      cat /tmp/tracker.log /tmp/server.log
      # TUNE_MODELS: NAME[@BATCH]:TRIALS[:COST_MODEL] ... (matmul is 4096^3; other names are kiln zoo
      # networks; COST_MODEL is kiln tune's --cost-model, xgboost by default, and a tune with `random`
      # keeps its records apart, NAME.random.records.json, for comparing the two).
      for spec in ${TUNE_MODELS:-matmul:48 resnet50:160}; do
        name=${spec%%:*} rest=${spec#*:}
        trials=${rest%%:*} model=xgboost
        [ "$rest" != "$trials" ] && model=${rest#*:}
        net=${name%%@*} batch=1
        [ "$net" != "$name" ] && batch=${name##*@}
        records=$out/$name.records.json log=$out/tune-$name.txt
        [ "$model" != xgboost ] && records=$out/$name.$model.records.json log=$out/tune-$name.$model.txt
        if [ "$net" = matmul ]; then "$kiln" zoo matmul --m 4096 --n 4096 --k 4096 -o /tmp/$name.onnx >/dev/null
        else "$kiln" zoo "$net" --batch "$batch" -o /tmp/$name.onnx >/dev/null; fi
        timeout "${KILN_TUNE_LIMIT:-150}" "$kiln" tune /tmp/$name.onnx --target "$target" --runner rpc://127.0.0.1:9190/gpu \
          --records "$records" --trials "$trials" --measures-per-round 16 --cost-model "$model" 2>&1 | tee "$log" | tail -n 30
      done
      timeout "${KILN_BENCH_LIMIT:-100000}" python3 bench/gpu/bench_gpu.py --kiln "$kiln" --target "$target" \
        --out "$out/tuned.txt" --only tuned --records-dir "$out" ;;
    profile)
      # Per-kernel GPU times of ResNet-50 (batch 16) and BERT-base (batch 1) with Nsight Compute (one
      # pass per kernel, gpu__time_duration), the slowest first: where the next GPU schedule should go.
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then echo "profile: no ncu here" | tee -a "$out/summary.txt"; continue; fi
      for spec in "resnet50 16" "bert_base 1"; do
        set -- $spec
        "$kiln" zoo "$1" --batch "$2" -o "/tmp/$1.onnx" >/dev/null
        "$kiln" compile "/tmp/$1.onnx" --target "$target" -o "/tmp/$1-pkg" >/dev/null
        "$ncu" --metrics gpu__time_duration.sum --csv --print-units base "$kiln" run "/tmp/$1-pkg" --repeat 1 --print 0 > "/tmp/$1.ncu.csv" 2>/dev/null
        python3 - "/tmp/$1.ncu.csv" "$1 b$2" <<'PY' | tee "$out/profile-$1.txt"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k, u, v = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
scale = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
t = collections.Counter()
for r in rows[1:]:
    try: t[r[k]] += float(r[v].replace(",", "")) * scale.get(r[u], 1)
    except ValueError: pass
total = sum(t.values())
print(f"{sys.argv[2]}: {len(t)} kernels, {total / 1e6:.3f} ms of GPU time")
for name, ns in t.most_common(25): print(f"{ns / 1e3:10.1f} us  {100 * ns / total:5.1f}%  {name}")
PY
      done ;;
    *) echo "device_run.sh: unknown phase $phase" >&2; exit 2 ;;
  esac
  echo "phase $phase: $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
done
