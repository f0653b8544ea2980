"""Asserts a summary's comm_bound_us is the bandwidth-optimal allreduce of its gradient bytes
at GBPS GB/s over n ranks: 2(n-1)/n * bytes / bandwidth; n is RANKS (the ranks of the busier
link level's phase, e.g. a node's for the 2D algorithm's NVLink phases), else world_size.

usage: check_comm_bound.py SUMMARY.json GBPS [RANKS]
"""
import json
import sys

summary = json.load(open(sys.argv[1]))
gbps = float(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else summary["world_size"]
expected = 2.0 * (n - 1) / n * summary["gradient_bytes"] / (gbps * 1e3)
actual = summary["comm_bound_us"]
assert abs(actual - expected) <= 1e-9 * expected, (actual, expected)
assert summary["lower_bound_us"] >= actual
print("comm bound", actual)
