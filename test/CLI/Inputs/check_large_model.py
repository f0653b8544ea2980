"""Checks a large-model `zenopt --json` summary: the configuration and memory
keys of the contract, the memory breakdown adding up and fitting, and auto
never slower than a baseline that fits (forced configurations need not be). Prints the configuration."""
import json
import sys

summary = json.load(open(sys.argv[1]))
parallel, memory = summary["parallel"], summary["memory"]
zero3 = ["zero3_regather", "zero3_prefetch_depth"] if parallel["zero"] == 3 else []
assert sorted(parallel) == sorted(["tp", "pp", "dp", "zero", "sequence_parallel", "recompute",
                                   "micro_batch", "micro_batches", "schedule", "decomposition"]
                                  + zero3), parallel
assert sorted(memory) == sorted(["per_gpu_bytes", "capacity_bytes", "weights_bytes", "gradients_bytes",
                                 "optimizer_bytes", "activations_bytes", "buffers_bytes",
                                 "reserve_bytes"]), memory
parts = sum(memory[k] for k in ["weights_bytes", "gradients_bytes", "optimizer_bytes",
                                "activations_bytes", "buffers_bytes", "reserve_bytes"])
assert memory["reserve_bytes"] > 0, memory
assert abs(parts - memory["per_gpu_bytes"]) <= 1e-9 * parts, memory
assert memory["per_gpu_bytes"] <= memory["capacity_bytes"], memory
assert parallel["tp"] * parallel["pp"] * parallel["dp"] == summary["world_size"], summary
assert 0 < summary["model_tflops_per_gpu"] <= summary["tflops_per_gpu"], summary
assert 0 < summary["mfu"] < 1, summary
# auto competes with every seed that fits; a forced configuration need not.
for name, us in summary["baselines"].items() if summary["strategy"] == "auto" else []:
    assert summary["iteration_us"] <= us * (1 + 1e-12), (name, us, summary["iteration_us"])
print("tp {tp} pp {pp} dp {dp} zero {zero} schedule {schedule}".format(**parallel))
print("not fitting:", " ".join(sorted(summary.get("baselines_not_fitting", {}))))
