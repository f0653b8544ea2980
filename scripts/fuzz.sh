#!/usr/bin/env bash
# The CI fuzz step: builds the importer, plan and cluster fuzz targets with clang's
# libFuzzer, ASan and UBSan (test/fuzz/CMakeLists.txt, a separate small build of only the
# libraries they need) and runs each for a fixed time over its corpus (test/fuzz/corpus)
# plus what it finds. Any crash, sanitizer report, leak or hang fails: libFuzzer exits
# non-zero and leaves the input that did it in the build directory (crash-*, leak-*,
# timeout-*); add it to the corpus once fixed.
#   ZEN_FUZZ_SECONDS   per target (default 60)
#   ZEN_FUZZ_TARGETS   which (default "importer plan cluster")
#   ZEN_FUZZ_BUILD_DIR (default build-fuzz)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ZEN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${ZEN_FUZZ_SECONDS:-60}"
targets="${ZEN_FUZZ_TARGETS:-importer plan cluster}"
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
  scratch="$build/corpus-$target"
  mkdir -p "$scratch"
  echo "zenopt fuzz: $target for $seconds s"
  "$build/zen-$target-fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/$target-" \
    "$scratch" "$root/test/fuzz/corpus/$target" 2>&1 | grep -v "^#[0-9]" || {
    echo "zenopt fuzz: $target FAILED (see $build/$target-*)"
    exit 1
  }
done
echo "zenopt fuzz: no findings"
