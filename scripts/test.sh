#!/usr/bin/env bash
# Installs, builds and runs every test (lit + FileCheck, GoogleTest, MPI runtime tests),
# then the fuzz step (scripts/fuzz.sh).
# Prints ctest's pass/fail summary and the fuzz step's; exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ZEN_BUILD_DIR:-$root/build}"
start=$(date +%s)
"$root/scripts/build.sh"
# Open MPI refuses to run as root without these (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
status=0
ctest --output-on-failure -j "$(nproc)" --timeout 300 || status=$?
# The fuzz step: ASan + UBSan libFuzzer builds of the importer, plan and cluster targets,
# a fixed seed and input count each over their corpora; a finding fails the run.
"$root/scripts/fuzz.sh" || status=$?
echo "zenopt: build + tests took $(( $(date +%s) - start )) s"
exit $status
