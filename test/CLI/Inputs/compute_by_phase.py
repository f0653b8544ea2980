"""Prints a plan's compute work by phase, the forward work before the first named task
reading a layer and the backward work through one (measured-compute.test)."""
import json
import sys

plan = json.load(open(sys.argv[1]))
compute = [t for t in plan["schedule"] if t["kind"] == "compute"]
totals = {}
for task in compute:
    totals[task["phase"]] = totals.get(task["phase"], 0.0) + task["work_us"]
print(" ".join(f"{phase} {totals.get(phase, 0.0):.1f}" for phase in
               ("forward", "backward", "optimizer")))


def until(phase, name, inclusive):
    total = 0.0
    for task in compute:
        if task["phase"] != phase:
            continue
        if task["name"] == name and not inclusive:
            return total
        total += task["work_us"]
        if task["name"] == name:
            return total
    raise SystemExit(f"no {phase} task {name}")


print(f"forward until fwd.layers.1/MatMul_3 {until('forward', 'fwd.layers.1/MatMul_3', False):.1f}")
print(f"backward through bwd.layers.1/MatMul_3 "
      f"{until('backward', 'bwd.layers.1/MatMul_3', True):.1f}")
