"""Asserts summaries report the same baselines (to the bit) and that auto beats each.

usage: check_baselines.py SUMMARY.json [MORE.json ...]
"""
import json
import sys

summaries = [json.load(open(p)) for p in sys.argv[1:]]
first = summaries[0]["baselines"]
for summary in summaries:
    assert summary["baselines"] == first, (summary["baselines"], first)
    for name, us in summary["baselines"].items():
        assert summary["iteration_us"] <= us, (name, summary["iteration_us"], us)
print("baselines", " ".join(f"{name}={us:.1f}" for name, us in sorted(first.items())))
