"""Asserts two summaries predict exactly the same iteration time."""
import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["iteration_us"] == b["iteration_us"], (a["iteration_us"], b["iteration_us"])
assert a["lower_bound_us"] == b["lower_bound_us"]
print("same", a["iteration_us"])
