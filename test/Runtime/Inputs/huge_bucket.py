"""Grows the first tensor of a plan to 2^44 elements (a 64 TiB bucket) and keeps the plan
valid: usage huge_bucket.py IN.json OUT.json."""
import json
import sys

plan = json.load(open(sys.argv[1]))
name = plan["buckets"][0]["tensors"][0]["name"]
for tensor in plan["tensors"]:
    if tensor["name"] == name:
        tensor["elements"] = 1 << 44
bucket = plan["buckets"][0]
offset = 0
for entry in bucket["tensors"]:
    if entry["name"] == name:
        entry["elements"] = 1 << 44
    entry["offset"] = offset
    offset += entry["elements"]
bucket["elements"] = offset
bucket["bytes"] = 4 * offset
for collective in bucket["collectives"]:
    collective["bytes"] = 4 * offset
json.dump(plan, open(sys.argv[2], "w"), indent=2)
