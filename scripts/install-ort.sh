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
if [ -f "$dir/node_modules/onnxruntime-node/package.json" ] && [ -f "$dir/node_modules/protobufjs/package.json" ]; then
  exit 0
fi
(cd "$dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --no-audit --no-fund >/dev/null)
