#!/usr/bin/env bash
# Configures and builds zenopt into ./build (Release). CUDA + NCCL are used when present.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ZEN_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
cmake --build "$build" -j "$(nproc)"
