"""Checks a `zenopt profile` cluster file: every collective fitted, quality fields sane."""
import json
import math
import sys

cluster = json.load(open(sys.argv[1]))
profiled = cluster["profiled"]
assert profiled["backend"] == "mpi", profiled["backend"]
ops = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast"}
fits = profiled["collectives"]
assert {fit["op"] for fit in fits} == ops, fits
for fit in fits:
    assert fit["ranks"] == 4, fit
    assert 0 < fit["min_bytes"] <= fit["max_bytes"], fit
    assert fit["alpha_us"] >= 0 and fit["beta_us_per_byte"] >= 0, fit
    assert fit["alpha_us"] + fit["beta_us_per_byte"] > 0, fit
    assert math.isfinite(fit["r_squared"]) and fit["r_squared"] <= 1, fit
    assert math.isfinite(fit["worst_relative_error"]) and fit["worst_relative_error"] >= 0, fit
# The ranges of one collective tile its measured sizes without gaps.
for op in ops:
    ranges = sorted((f["min_bytes"], f["max_bytes"]) for f in fits if f["op"] == op)
    for (_, high), (low, _) in zip(ranges, ranges[1:]):
        assert high == low, (op, ranges)
validation = profiled["validation"]
assert {check["op"] for check in validation} == ops, validation
for check in validation:
    assert check["points"] >= 1 and 0 <= check["median_relative_error"] <= check["worst_relative_error"], check
compression = profiled["compression_gbps"]
assert set(compression) == {"fp16", "bf16", "int8", "topk", "randomk", "sign"}, compression
assert all(value > 0 for value in compression.values()), compression
# Compute as measured on every rank at once, each section saying how it was measured.
compute = profiled["compute"]
shapes = {(g["m"], g["n"], g["k"]) for g in compute["gemm"]}
assert (32, 1024, 1024) in shapes and (16, 16, 16) in shapes, shapes  # skinny and small
assert all(g["gflops"] > 0 for g in compute["gemm"]), compute
assert compute["memory_gbps"] > 0 and compute["kernel_overhead_us"] >= 0, compute
assert "4 ranks at once" in compute["method"], compute["method"]
executor = profiled["executor"]
assert executor["alpha_us"] >= 0 and executor["beta_us_per_byte"] >= 0, executor
assert "through the runtime" in executor["method"], executor
interference = profiled["interference"]
for key in ("compute_slowdown", "collective_slowdown"):
    assert 1 <= interference[key] <= 10, interference
assert interference["collective_bytes"] == 4 << 20, interference
assert "the runtime's all-reduce" in interference["method"], interference
print("profile file OK:", len(fits), "fits")
