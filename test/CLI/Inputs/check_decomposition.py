"""Checks zenopt --json's decomposition degrees and the decomposition baselines."""
import json
import sys

summary = json.load(open(sys.argv[1]))
chunks = summary["parallel"]["decomposition"]
degrees = [chunks[region][phase] for region in ("attention", "mlp") for phase in ("forward", "backward")]
print("degrees in 1 2 4 8:", all(k in (1, 2, 4, 8) for k in degrees))
print("decomposed somewhere:", any(k > 1 for k in degrees))
auto = summary["iteration_us"]
for name in ("tp-asynctp", "tp-nodecomp", "tp-uniform"):
    print(f"{name} no faster:", summary["baselines"][name] >= auto * (1 - 1e-12))
print("faster than no decomposition:", summary["baselines"]["tp-nodecomp"] > auto)
