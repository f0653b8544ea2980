"""Asserts the second summary predicts less compute and a shorter iteration than the first."""
import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["compute_us"] < a["compute_us"], (a["compute_us"], b["compute_us"])
assert b["iteration_us"] < a["iteration_us"], (a["iteration_us"], b["iteration_us"])
print("compute %.1f -> %.1f us, iteration %.1f -> %.1f us"
      % (a["compute_us"], b["compute_us"], a["iteration_us"], b["iteration_us"]))
