#!/usr/bin/env python3
"""MoE models in the large-model search, predicted, on every GPU preset.

Plans whole-depth `zenopt-modelgen moe` models (bf16 compute, Adam, one sample of
the sequence per GPU) that do not fit in data parallelism at any expert-parallel
degree, so zenopt searches tp/pp/dp/ZeRO/recomputation with ep
(docs/design.md "MoE blocks in the large-model search"). Prints, per model and
cluster, what data parallelism would need at its best ep, the chosen
configuration and its MoE decisions, memory per GPU, the predicted iteration
and MFU, and the baselines: the seeds (megatron, zero3, ddp: each with the
largest ep its dp group places) and the chosen configuration with its MoE
layers as moe-nopipe and tutel. The seeds and MoE baselines compete in the
search, so auto is never slower than one that fits by construction.

usage: large_model.py BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# name, zenopt-modelgen moe arguments
MODELS = [
    ("Mixtral-like (32 blocks, h 4096, 8 experts top-2, seq 4096)",
     ["--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "4096", "--vocab", "32000",
      "--experts", "8", "--top-k", "2", "--expert-ffn", "14336", "--moe-every", "1"]),
    ("GShard-like (24 blocks, h 2048, 64 experts top-2 every 2nd, seq 2048)",
     ["--layers", "24", "--hidden", "2048", "--heads", "16", "--seq", "2048", "--vocab", "32000",
      "--experts", "64", "--top-k", "2", "--expert-ffn", "8192", "--moe-every", "2"]),
]
CLUSTERS = ["a100x8", "a100x64", "h100x256", "v100x16-10gbe"]
BASELINES = ["megatron", "zero3", "ddp", "moe-nopipe", "tutel"]


def main():
    bin_dir = os.path.join(sys.argv[1], "bin")
    work = tempfile.mkdtemp(prefix="zen-moe-large-")
    print("| model | cluster | data parallelism needs | configuration | MoE blocks | memory per GPU | "
          "auto | MFU | " + " | ".join(BASELINES) + " |")
    print("|---|---|---|---|---|---|---|---|" + "---|" * len(BASELINES))
    for index, (name, args) in enumerate(MODELS):
        model = os.path.join(work, f"moe{index}.onnx")
        subprocess.run([os.path.join(bin_dir, "zenopt-modelgen"), "moe", *args, "-o", model], check=True)
        for cluster in CLUSTERS:
            plan_path = os.path.join(work, f"plan{index}-{cluster}.json")
            run = subprocess.run([os.path.join(bin_dir, "zenopt"), model, "--cluster", cluster,
                                  "--precision", "bf16", "-o", plan_path],
                                 capture_output=True, text=True)
            needs = re.search(r"the smallest: ep (\d+) needs ([0-9.]+) GB", run.stderr)
            needs_text = f"{needs.group(2)} GB (ep {needs.group(1)})" if needs else "fits"
            if run.returncode != 0:
                least = re.search(r"the smallest requirement found, (.*?), needs ([0-9.]+) GB", run.stderr)
                reason = (f"nothing fits; the least: {least.group(1)}, {least.group(2)} GB per GPU"
                          if least else (run.stderr.strip().splitlines() or ["?"])[-1])
                print(f"| {name} | {cluster} | {needs_text} | {reason} |" + " |" * (4 + len(BASELINES)))
                continue
            plan = json.load(open(plan_path))
            p = plan.get("parallel")
            if p is None:
                print(f"| {name} | {cluster} | {needs_text} | data parallel (MoE planner) |" + " |" * (4 + len(BASELINES)))
                continue
            m = p["moe"]
            config = (f"tp {p['tp']} x pp {p['pp']} x dp {p['dp']}, ZeRO {p['zero']}, "
                      f"{'SP, ' if p['sequence_parallel'] else ''}recompute {p['recompute']}, "
                      f"{p['micro_batches']} x {p['micro_batch']}, {p['schedule']}")
            shards = m.get("expert_tensor_parallel", 1)
            blocks = (f"ep {m['ep']}, {m['forward']}/{m['backward']} {m['all_to_all']}"
                      + (f", experts split over tp {shards}" if shards > 1 else ""))
            memory = f"{p['memory']['per_gpu_bytes'] / 1e9:.1f} of {p['memory']['capacity_bytes'] / 1e9:.0f} GB"
            cells = []
            for baseline in BASELINES:
                if baseline in p["baselines"]:
                    cells.append(f"{p['baselines'][baseline] / 1e3:.1f} ms")
                elif baseline in p["baselines_not_fitting"]:
                    cells.append("does not fit")
                else:
                    cells.append("-")
            print(f"| {name} | {cluster} | {needs_text} | {config} | {blocks} | {memory} | "
                  f"{p['iteration_us'] / 1e3:.1f} ms | {100 * p['mfu']:.1f}% | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
