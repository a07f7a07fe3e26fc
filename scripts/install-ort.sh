#!/usr/bin/env bash
# Installs ONNX Runtime's npm package (kiln's peer in tests and benchmarks) into bench/ort/node_modules.
# Idempotent and quiet when present. ONNXRUNTIME_NODE_INSTALL=skip stops its install step from trying
# to download extra binaries, which fails on machines that reach only the package registries.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/bench/ort"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
# One installer at a time: tests that call this concurrently must not load a half-written library.
exec 9>"$dir/.install.lock"
flock 9
if [ -f "$dir/node_modules/.kiln-installed" ]; then
  exit 0
fi
(cd "$dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --no-audit --no-fund >/dev/null)
touch "$dir/node_modules/.kiln-installed"
