"""Asserts a summary's comm_bound_us is the bandwidth-optimal allreduce of its gradient bytes
at GBPS GB/s over its world_size ranks, 2(n-1)/n * bytes / bandwidth, plus the network part of
each row-sparse table's synchronisation under its scheme (more than nothing, at most its
predicted time).

usage: check_comm_bound.py SUMMARY.json GBPS
"""
import json
import sys

summary = json.load(open(sys.argv[1]))
gbps = float(sys.argv[2])
n = summary["world_size"]
expected = 2.0 * (n - 1) / n * summary["gradient_bytes"] / (gbps * 1e3)
actual = summary["comm_bound_us"]
tables = summary.get("sparse", {}).get("tensors", [])
if tables:
    assert expected < actual <= expected + sum(t["predicted_us"] for t in tables) * (1 + 1e-9), (
        actual, expected)
else:
    assert abs(actual - expected) <= 1e-9 * expected, (actual, expected)
assert summary["lower_bound_us"] >= actual
print("comm bound", actual)
