#!/usr/bin/env bash
# Runs libzenrt's GPU checks in one go on a machine with an NVIDIA GPU:
#   scripts/gpu-checks.sh [BUILD_DIR]      (default: build-gpu, configured if missing)
# With ZEN_GPU_PREBUILT=1, BUILD_DIR/bin already holds the four binaries below (built
# elsewhere with CUDA for sm_80;sm_90) and nothing is configured or built: for a GPU
# machine that lacks MLIR or the other build dependencies.
# Builds the runtime with CUDA + NCCL, then runs the CUDA kernel tests (compared
# bit for bit with the CPU kernels), the NCCL backend test and the executor on
# device buffers (every compression method and collective shape, checked against
# the host path and against zenopt-run's reference numerics, which must also fail on
# the kernels zenopt-run-mutant breaks) and the pipelined MoE layer on device buffers
# (zenrt-moe-check --device: every r, both all-to-alls, every token format, against the
# unpipelined run bit for bit and a host reference) on one rank and, when the machine has
# several GPUs, on all of them. Fails when no GPU is visible (the tests would only skip).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-checks: no NVIDIA GPU visible (nvidia-smi -L failed)" >&2
  exit 1
fi
gpus=$(nvidia-smi -L | wc -l)
echo "gpu-checks: $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

if [ "${ZEN_GPU_PREBUILT:-0}" = 1 ]; then
  for b in ZenRuntimeCudaTests ZenRuntimeKernelTests ZenRuntimeApiTests zenopt-run zenopt-run-mutant zenrt-moe-check; do
    [ -x "$build/bin/$b" ] || { echo "gpu-checks: $build/bin/$b missing (ZEN_GPU_PREBUILT=1)" >&2; exit 1; }
  done
elif [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=${MLIR_DIR:-/usr/lib/llvm-19/lib/cmake/mlir} \
    -DLLVM_EXTERNAL_LIT=${LLVM_EXTERNAL_LIT:-/usr/lib/llvm-19/build/utils/lit/lit.py}
fi
[ "${ZEN_GPU_PREBUILT:-0}" = 1 ] || ninja -C "$build" -j "$jobs" ZenRuntimeCudaTests ZenRuntimeKernelTests ZenRuntimeApiTests zenopt-run zenopt-run-mutant zenrt-moe-check

mpirun=(mpirun --allow-run-as-root --oversubscribe)
# Fail rather than skip: every test must really run on this machine.
"$build/bin/ZenRuntimeKernelTests"
"$build/bin/ZenRuntimeApiTests"  # ZENRT_MEMORY_DEVICE starts a runtime here
out=$("${mpirun[@]}" -np 1 "$build/bin/ZenRuntimeCudaTests" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -3
if echo "$out" | grep -q "SKIPPED"; then
  echo "gpu-checks: CUDA tests were skipped although a GPU is visible" >&2
  exit 1
fi
if [ "$gpus" -gt 1 ]; then
  "${mpirun[@]}" -np "$gpus" "$build/bin/ZenRuntimeCudaTests" \
    --gtest_filter='Nccl.*:DeviceExecutor.*:DeviceMoe.*'
fi
# The MoE layer end to end on device buffers, against the host reference (moe.test's checks).
for ranks in 1 $([ "$gpus" -gt 1 ] && echo "$gpus"); do
  for tokens in none fp16 bf16 int8; do
    out=$("${mpirun[@]}" -np "$ranks" "$build/bin/zenrt-moe-check" --device --experts $((8 * ranks)) \
      --hidden 24 --ffn 40 --capacity 8 --chunks 1,2,4,8 --algorithms flat,2d \
      --ranks-per-node 1 --tokens "$tokens" --timeout 60 2>&1) || { echo "$out"; exit 1; }
    grep -q "moe numerics: OK" <<<"$out" || { echo "$out"; echo "gpu-checks: zenrt-moe-check" \
      "--device --tokens $tokens on $ranks rank(s) did not pass" >&2; exit 1; }
  done
done
echo "gpu-checks: MoE layer on device buffers: every r, algorithm and token format ok"
# End to end on device buffers: zenopt-run --device checks every method's numerics
# (exact, bounded, reference top-k/random-k/sign/PowerSGD and error feedback) as the lit
# tests do on host buffers. check_plan RANKS "MAKE-PLAN ARGS" [ZENOPT-RUN ARGS...] runs one
# plan; with ZENRT_MUTATE=KERNEL set, zenopt-run-mutant must fail it instead.
plans=$(mktemp -d)
trap 'rm -rf "$plans"' EXIT
check_plan() {
  local ranks=$1 spec=$2 program=zenopt-run expect="numerics: ok"
  shift 2
  if [ -n "${ZENRT_MUTATE:-}" ]; then program=zenopt-run-mutant expect="numerics: FAILED"; fi
  local plan="$plans/$(tr -c 'a-z0-9_\n' '-' <<<"$spec $* ${ZENRT_MUTATE:-}")np$ranks.json"
  python3 "$root/test/Runtime/Inputs/make_plan.py" $spec --ranks "$ranks" -o "$plan"
  # Capture first: grep -q closing the pipe early would fail the run under pipefail.
  local run
  run=$("${mpirun[@]}" -x ZENRT_MUTATE -np "$ranks" "$build/bin/$program" "$plan" --device \
    --iters 3 --timeout 60 --time-scale 0 "$@" 2>&1) || true  # the output tells
  grep -q "$expect" <<<"$run" || { echo "$run"; echo "gpu-checks: $program --device" \
    "${ZENRT_MUTATE:+(ZENRT_MUTATE=$ZENRT_MUTATE) }did not print '$expect': $spec $*," \
    "$ranks rank(s)" >&2; exit 1; }
}
export ZENRT_MUTATE=
for ranks in 1 $([ "$gpus" -gt 1 ] && echo "$gpus"); do
  for spec in "none all_reduce" "none rs_ag" "none a2a_ag" "none broadcast" \
              "none rs_ag --decoupled" "fp16 all_reduce" "bf16 rs_ag" "int8 all_gather" \
              "int8 all_reduce" "topk all_gather" "randomk all_gather" "randomk all_reduce" \
              "sign all_gather" "powersgd all_reduce"; do
    set -- $spec
    check_plan "$ranks" "--method $1 --sequence $2 ${3:-}"
  done
  check_plan "$ranks" "--method topk --sequence all_gather" --gradients tied
  check_plan "$ranks" "--method powersgd --sequence all_reduce" --gradients low-rank
done
# The mutations that reach the device path: random-k's indices are drawn on the host, and
# PowerSGD's rank and error feedback live in the programs and the executor.
for ZENRT_MUTATE in randomk powersgd-rank powersgd-zero error-feedback; do
  case $ZENRT_MUTATE in
    randomk) check_plan 1 "--method randomk --sequence all_reduce" ;;
    *) check_plan 1 "--method powersgd --sequence all_reduce" ;;
  esac
done
ZENRT_MUTATE=
echo "gpu-checks: zenopt-run --device: every method ok, every device-path mutant caught"
echo "gpu-checks: all GPU checks passed"
