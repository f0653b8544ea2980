"""Compares two large-model `zenopt --json` summaries of one model (issue 40).

  check_zero3.py regather PER_MICROBATCH.json PER_STEP.json
      network-bound ZeRO-3: gathering once a step is faster and keeps the weights and the
      accumulated gradients whole (ZeRO 1's memory for them); each summary names its setting.
  check_zero3.py prefetch DEPTH1.json DEPTH2.json
      a deeper prefetch holds one more gathered unit and is never slower.
  check_zero3.py attention FLASH.json UNFUSED.json
      unfused attention keeps the scores (more activation memory) and moves them through memory
      (a longer iteration).
Prints one line per check that holds; exits non-zero naming the first that does not.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def expect(condition, what):
    if not condition:
        sys.exit("failed: " + what)
    print(what)


mode, first, second = sys.argv[1], load(sys.argv[2]), load(sys.argv[3])
a, b = first["parallel"], second["parallel"]
if mode == "regather":
    expect(a["zero3_regather"] == "per-microbatch" and b["zero3_regather"] == "per-step", "settings named")
    expect(second["iteration_us"] < first["iteration_us"], "per-step faster")
    expect(second["exposed_comm_us"] < first["exposed_comm_us"], "per-step exposes less")
    dp = a["dp"]
    ratio = second["memory"]["weights_bytes"] / first["memory"]["weights_bytes"]
    expect(abs(ratio - dp) < 1e-6 * dp, "per-step weights whole")
    ratio = second["memory"]["gradients_bytes"] / first["memory"]["gradients_bytes"]
    expect(abs(ratio - dp) < 1e-6 * dp, "per-step gradients whole")
elif mode == "prefetch":
    expect(a["zero3_prefetch_depth"] == 1 and b["zero3_prefetch_depth"] == 2, "depths named")
    expect(second["memory"]["buffers_bytes"] > first["memory"]["buffers_bytes"], "deeper prefetch buffers more")
    expect(second["iteration_us"] <= first["iteration_us"], "deeper prefetch never slower")
elif mode == "attention":
    expect(second["memory"]["activations_bytes"] > first["memory"]["activations_bytes"], "unfused keeps the scores")
    expect(second["iteration_us"] > first["iteration_us"], "unfused slower")
else:
    sys.exit("unknown mode " + mode)
