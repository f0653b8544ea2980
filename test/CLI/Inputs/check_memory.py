"""Checks the `memory` object of `zenopt --json` summaries: the contract's keys, the parts
adding up to per_gpu_bytes and fitting the capacity. With two summaries of the same model, the
second planned in bf16 (mixed precision): 2 + 4 + 12 bytes per parameter (fp32 main gradients,
Megatron-LM's and DeepSpeed's default under bf16) against fp32's 4 + 4 + 8, and the fp32
activations kept at half the width; a third, in bf16 with 16-bit gradients
(--grad-accumulation-dtype bf16), has ZeRO's 2 + 2 + 12. With --moe, the memory is the MoE
section's whole-model figure. Prints the first summary's breakdown in GB."""
import json
import sys

KEYS = ["per_gpu_bytes", "capacity_bytes", "weights_bytes", "gradients_bytes", "optimizer_bytes",
        "activations_bytes", "buffers_bytes", "reserve_bytes"]
PARTS = KEYS[2:]

args = [a for a in sys.argv[1:] if a != "--moe"]
summaries = [json.load(open(path)) for path in args]
for summary in summaries:
    memory = summary["memory"]
    assert list(memory) == KEYS, list(memory)
    total = sum(memory[k] for k in PARTS)
    assert abs(total - memory["per_gpu_bytes"]) <= 1e-9 * total, memory
    assert memory["weights_bytes"] > 0 and memory["activations_bytes"] > 0, memory
    assert memory["capacity_bytes"] <= 0 or memory["per_gpu_bytes"] <= memory["capacity_bytes"], memory
    if "--moe" in sys.argv:
        assert memory["per_gpu_bytes"] == summary["moe"]["memory"]["per_gpu_bytes"], summary["moe"]
if len(summaries) >= 2:
    fp32, bf16 = (s["memory"] for s in summaries[:2])
    params = fp32["weights_bytes"] / 4
    assert bf16["weights_bytes"] == 2 * params and bf16["gradients_bytes"] == 4 * params, bf16
    assert fp32["optimizer_bytes"] == 8 * params and bf16["optimizer_bytes"] == 12 * params, bf16
    assert bf16["activations_bytes"] == fp32["activations_bytes"] / 2, (fp32, bf16)
if len(summaries) == 3:
    half = summaries[2]["memory"]
    assert half["gradients_bytes"] == 2 * params and half["optimizer_bytes"] == 12 * params, half
memory = summaries[0]["memory"]
print(" ".join("{} {:.1f}".format(k.replace("_bytes", ""), memory[k] / 1e9) for k in KEYS))
