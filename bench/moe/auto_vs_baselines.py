#!/usr/bin/env python3
"""MoE decisions and baselines on every GPU preset, predicted.

Plans `zenopt-modelgen moe` models (bf16 compute) on each GPU preset and prints,
per model and cluster, the expert-parallel degree zenopt chooses, each MoE
layer's forward/backward pipelining degree and all-to-all algorithm, and the
predicted iteration of auto against the MoE baselines on the same ep:
moe-nopipe (r = 1, flat), tutel (one r of 1, 2, 4, 8 and one algorithm for the
whole model) and pipemoe (per layer PipeMoE's linear-model r, flat). The
baselines are among auto's choices, so auto is never slower by construction.
Also: the whole model's memory per GPU under the chosen ep, and auto again with
int8 allowed (`--compressor int8`: on the dispatched tokens, and on the
gradients where that pays), whose ep and decisions may differ.

usage: auto_vs_baselines.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

# name, zenopt-modelgen moe arguments
MODELS = [
    ("MoE-S (8 experts, h 768, seq 128)", []),
    ("MoE-M (64 experts, h 2048, seq 2048)",
     ["--layers", "4", "--hidden", "2048", "--heads", "16", "--seq", "2048", "--vocab", "32000",
      "--experts", "64", "--expert-ffn", "4096", "--moe-every", "2"]),
    ("Mixtral-like (8 experts, h 4096, seq 4096)",
     ["--layers", "4", "--hidden", "4096", "--heads", "32", "--seq", "4096", "--vocab", "32000",
      "--experts", "8", "--expert-ffn", "14336", "--moe-every", "1"]),
    ("Switch-like (256 experts top-1, h 1024, seq 1024)",
     ["--layers", "4", "--hidden", "1024", "--heads", "16", "--seq", "1024", "--vocab", "32000",
      "--experts", "256", "--top-k", "1", "--expert-ffn", "4096", "--moe-every", "2"]),
]
CLUSTERS = ["a100x8", "a100x64", "h100x256", "v100x16-10gbe"]
BASELINES = ["moe-nopipe", "tutel", "pipemoe"]


def decisions(layers):
    """Each layer's fwd/bwd/algorithm (tokens, "serial" when its all-to-alls take turns with
    the gradient sync); one entry when every layer agrees."""
    each = ["{}/{} {}{}{}".format(l["forward"], l["backward"], l["all_to_all"],
                                  "" if l["token_compression"] == "none" else " " + l["token_compression"],
                                  " serial" if l["gradient_sync"] == "serial" else "")
            for l in layers]
    return each[0] + " (all)" if len(set(each)) == 1 else ", ".join(each)


def main():
    bin_dir = os.path.join(sys.argv[1], "bin")
    work = tempfile.mkdtemp(prefix="zen-moe-")
    print("| model | cluster | GPUs | ep | degrees fwd/bwd, all-to-all | memory per GPU | auto | "
          "moe-nopipe | tutel | pipemoe | auto vs nopipe | int8 allowed: ep, degrees, tokens | "
          "auto, int8 allowed | gain |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for index, (name, args) in enumerate(MODELS):
        model = os.path.join(work, f"moe{index}.onnx")
        subprocess.run([os.path.join(bin_dir, "zenopt-modelgen"), "moe", *args, "-o", model], check=True)
        for cluster in CLUSTERS:
            plans = []
            for extra in [[], ["--compressor", "int8"]]:
                result = subprocess.run([os.path.join(bin_dir, "zenopt"), model, "--cluster", cluster,
                                         "--precision", "bf16", "--json", "-q", *extra],
                                        capture_output=True, text=True)
                plans.append(json.loads(result.stdout) if result.returncode == 0
                             else result.stderr.strip())
            s, c = plans
            if isinstance(s, str):
                print(f"| {name} | {cluster} | | {s} |" + " |" * 10)
                continue
            moe, auto = s["moe"], s["iteration_us"]
            memory = moe["memory"]
            times = " | ".join(f"{s['baselines'][b] / 1e3:.2f} ms" for b in BASELINES)
            row = (f"| {name} | {cluster} | {s['world_size']} | {moe['ep']} | {decisions(moe['layers'])} | "
                   f"{memory['per_gpu_bytes'] / 1e9:.1f} of {memory['capacity_bytes'] / 1e9:.0f} GB | "
                   f"{auto / 1e3:.2f} ms | {times} | {s['baselines']['moe-nopipe'] / auto:.3f}x | ")
            if isinstance(c, str):
                row += f"{c} | | |"
            else:
                row += (f"{c['moe']['ep']}, {decisions(c['moe']['layers'])} | "
                        f"{c['iteration_us'] / 1e3:.2f} ms | {auto / c['iteration_us']:.3f}x |")
            print(row)


if __name__ == "__main__":
    main()
