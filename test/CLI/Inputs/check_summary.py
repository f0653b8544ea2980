"""Checks a `zenopt --json` summary: the contract fields and, for auto, that it beats every baseline.
    check_summary.py SUMMARY STRATEGY [compressed]
With `compressed` (zenopt ran with --compressor), `baselines_uncompressed` must be there and no
baseline may be reported slower than its uncompressed self; without, it must be absent."""
import json
import sys

path, strategy = sys.argv[1], sys.argv[2]
compressed = sys.argv[3:] == ["compressed"]
with open(path) as f:
    text = f.read()
assert text.count("\n") == 1, "--json must print exactly one line"
summary = json.loads(text)
for key in ("strategy", "iteration_us", "compute_us", "exposed_comm_us", "lower_bound_us",
            "buckets", "baselines"):
    assert key in summary, f"missing {key}"
assert summary["strategy"] == strategy, summary["strategy"]
assert set(summary["baselines"]) == {"nooverlap", "wfbp", "ddp", "horovod", "mgwfbp"}, summary["baselines"]
if compressed:
    plain = summary["baselines_uncompressed"]
    assert set(plain) == set(summary["baselines"]), plain
    for name, us in summary["baselines"].items():
        assert us <= plain[name], f"{name}: at its best {us} > uncompressed {plain[name]}"
else:
    assert "baselines_uncompressed" not in summary, "only with --compressor"
# The bound covers the compressors the plan runs.
assert summary["iteration_us"] >= summary["lower_bound_us"] * (1 - 1e-9)
assert abs(summary["exposed_comm_us"] - (summary["iteration_us"] - summary["compute_us"])) < 1e-6
if strategy == "auto":
    for name, us in summary["baselines"].items():
        assert summary["iteration_us"] <= us * (1 + 1e-12), f"auto {summary['iteration_us']} > {name} {us}"
print("ok", path)
