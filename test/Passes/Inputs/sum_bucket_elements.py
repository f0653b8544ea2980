"""Prints the elements the gradient buckets of a planned zen module synchronise in total."""
import re
import sys

total = 0
for line in sys.stdin:
    # Each bucket's main collective carries `bucket = N` and its payload type last.
    if re.search(r"zen\.(all_reduce|reduce_scatter) .*bucket = \d+", line):
        match = re.search(r": tensor<(\d+)xf32>(?: ->.*)?$", line.strip())
        total += int(match.group(1))
print(f"bucket elements {total}")
