"""Prints a plan file's world size and its cluster spec's node count and GPU memory."""
import json
import sys

plan = json.load(open(sys.argv[1]))
spec = plan["cluster"]["spec"]
spec = json.loads(spec) if isinstance(spec, str) else spec
print("world_size", plan["cluster"]["world_size"], "nodes", spec["nodes"],
      "memory_gb", spec["gpu"].get("memory_gb"))
