"""Checks zenopt --json summaries (issue 40, docs/plan-format.md "The --json summary").

  check_iteration_parts.py sum SUMMARY.json...
      every summary's iteration_us is compute_us + exposed_comm_us + bubble_us + moe_extra_us,
      each part >= 0, and lower_bound_us <= iteration_us.
  check_iteration_parts.py same TOLERANCE DATA_PARALLEL.json FORCED.json
      the data-parallel plan and the large-model search forced to the same configuration
      (tp 1, pp 1, ZeRO 0) price its iteration, compute and lower bound within TOLERANCE.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def check_sum(paths):
    for path in paths:
        s = load(path)
        parts = ["compute_us", "exposed_comm_us", "bubble_us", "moe_extra_us"]
        for key in parts + ["iteration_us", "lower_bound_us"]:
            if key not in s:
                sys.exit(f"{path}: no {key}")
        total = sum(s[key] for key in parts)
        if abs(total - s["iteration_us"]) > 1e-9 * max(1.0, s["iteration_us"]):
            sys.exit(f"{path}: iteration_us {s['iteration_us']} != sum of parts {total}")
        for key in ["compute_us", "exposed_comm_us", "bubble_us"]:
            if s[key] < 0:
                sys.exit(f"{path}: {key} {s[key]} < 0")
        if s["lower_bound_us"] > s["iteration_us"] * (1 + 1e-9):
            sys.exit(f"{path}: lower bound {s['lower_bound_us']} above the iteration")
        print(f"{path}: sum ok ({s['strategy']}, {'parallel' if 'parallel' in s else 'data-parallel'})")


def check_same(tolerance, dp_path, forced_path):
    dp, forced = load(dp_path), load(forced_path)
    if "parallel" in dp or "parallel" not in forced:
        sys.exit("expected a data-parallel summary, then a large-model one")
    p = forced["parallel"]
    if (p["tp"], p["pp"], p["zero"]) != (1, 1, 0):
        sys.exit(f"the forced plan is tp {p['tp']} pp {p['pp']} ZeRO {p['zero']}")
    for key in ["iteration_us", "compute_us", "lower_bound_us"]:
        ratio = forced[key] / dp[key]
        print(f"{key}: data-parallel {dp[key]:.1f}, forced {forced[key]:.1f}, ratio {ratio:.4f}")
        if abs(ratio - 1) > tolerance:
            sys.exit(f"{key} differs by more than {tolerance}")


if __name__ == "__main__":
    if sys.argv[1] == "sum":
        check_sum(sys.argv[2:])
    elif sys.argv[1] == "same":
        check_same(float(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
