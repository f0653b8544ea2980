#!/usr/bin/env bash
# Installs, builds and plans ResNet-50 on the built-in default cluster (64 A100s), writing the
# plan, a Chrome trace and a timeline picture to ./out/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh"
mkdir -p "$root/out"
"$root/build/bin/zenopt" "$root/examples/models/resnet50.onnx" \
  -o "$root/out/resnet50.plan.json" --trace "$root/out/resnet50.trace.json" \
  --timeline-svg "$root/out/resnet50.svg" "$@"
echo "plan, trace and timeline written to $root/out/"
