#!/usr/bin/env bash
# The CI fuzz step: builds the importer, plan, cluster and planning fuzz targets with
# clang's libFuzzer, ASan and UBSan (test/fuzz/CMakeLists.txt, a separate small build of
# only the libraries they need) and runs each for a fixed number of inputs over its corpus
# (test/fuzz/corpus) plus what it finds. The planning target plans on fuzzed clusters,
# problems and flags (the autotuner, the baselines, the large-model search), not files.
# Any crash, sanitizer report, leak or hang fails: libFuzzer exits non-zero and leaves the
# input that did it in the build directory (crash-*, leak-*, timeout-*, oom-*); add it to
# the corpus once fixed.
# Every input of every target runs under two limits, because unbounded work is a bug the
# step must catch rather than wait out: -timeout=10 (one input planning or parsing for
# longer is reported as a hang; the slowest planning inputs take about a second under the
# sanitizers) and -rss_limit_mb=2048 (an input whose process grows past 2 GiB, as a 2^40
# --global-batch once did, is reported as out-of-memory instead of swapping the CI machine;
# -malloc_limit_mb follows it, so one oversized allocation fails at once).
# By default the run is reproducible: a fixed seed and a fixed number of inputs per target,
# so CI passes or fails the same way on every run of the same commit. Exploration (a random
# seed for a time budget) is opt-in and belongs on a developer's machine.
#   ZEN_FUZZ_RUNS      inputs per target in the reproducible run (default 200000; planning,
#                      which plans every input, 2000: 20-60 s on 2 cores)
#   ZEN_FUZZ_SECONDS   explore instead: a random seed for this many seconds per target
#   ZEN_FUZZ_TARGETS   which (default "importer plan cluster planning")
#   ZEN_FUZZ_BUILD_DIR (default build-fuzz)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ZEN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
targets="${ZEN_FUZZ_TARGETS:-importer plan cluster planning}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root/test/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER}
fi
cmake --build "$build" -j "$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for target in $targets; do
  # libFuzzer adds what it finds to its first directory: a scratch copy, not the repository.
  # The reproducible run starts it empty; exploration keeps what earlier runs found.
  scratch="$build/corpus-$target"
  if [ -n "${ZEN_FUZZ_SECONDS:-}" ]; then
    budget=(-max_total_time="$ZEN_FUZZ_SECONDS")
    what="$ZEN_FUZZ_SECONDS s, random seed"
  else
    rm -rf "$scratch"
    runs="${ZEN_FUZZ_RUNS:-$([ "$target" = planning ] && echo 2000 || echo 200000)}"
    budget=(-runs="$runs" -seed=1)
    what="$runs inputs, seed 1"
  fi
  mkdir -p "$scratch"
  echo "zenopt fuzz: $target ($what)"
  "$build/zen-$target-fuzzer" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/$target-" \
    "$scratch" "$root/test/fuzz/corpus/$target" 2>&1 | grep -v "^#[0-9]" || {
    echo "zenopt fuzz: $target FAILED (see $build/$target-*)"
    exit 1
  }
done
echo "zenopt fuzz: no findings"
