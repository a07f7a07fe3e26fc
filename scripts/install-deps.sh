#!/usr/bin/env bash
# Installs the Debian packages kiln needs. Idempotent: quiet and quick when everything is present.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  llvm-19-dev                   # code generation (backends/llvm)
  libtomlplusplus-dev           # target description files (targets/*.toml)
  qemu-user g++-aarch64-linux-gnu  # AArch64 packages: cross-linked runners under QEMU
  gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm  # Cortex-M packages: firmware on QEMU's MPS2 boards
  clang-19 libclang-rt-19-dev   # libFuzzer target for the importer
  libxgboost-dev                # the tuner's cost model (scheduler/search)
  libz3-dev                     # proofs that lowered programs stay inside their buffers (scheduler/lower)
  libopenblas-dev               # bench/: sgemm baseline
  python3                       # scripts/test-summary.py, bench/ scripts
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
