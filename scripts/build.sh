#!/usr/bin/env bash
# Configures (once) and builds kiln into build/. CI=true turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
if [ ! -f build/build.ninja ] || ! grep -q "KILN_WERROR:BOOL=$werror" build/CMakeCache.txt; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=$werror >/dev/null
fi
ninja -C build "$@"
