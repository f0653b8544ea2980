#!/usr/bin/env bash
# Installs, builds and plans ResNet-50 on the built-in default cluster (64 A100s).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh"
"$root/build/bin/zenopt" "$root/examples/models/resnet50.onnx" "$@"
