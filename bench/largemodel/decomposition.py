#!/usr/bin/env python3
"""Decomposition degree of tensor-parallel GEMMs and their collectives, predicted.

Plans `zenopt-modelgen gpt` models of SC21 and GPT-3 shapes at tp 8 (the rest of
the configuration searched) on the h100x256 and a100x64 presets, and prints the
chosen chunks per region and phase with the iteration time of auto against the
decomposition baselines on the same configuration: tp-nodecomp (k = 1, Megatron
without overlap), tp-asynctp (k = tp) and tp-uniform (the best single k).

usage: decomposition.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

# name, layers, hidden, heads
MODELS = [("GPT 18B", 40, 6144, 48), ("GPT-3 175B", 96, 12288, 96), ("GPT 1T", 128, 25600, 160)]
CLUSTERS = [("h100x256", 32), ("a100x64", 128)]  # preset, nodes (256 and 1024 GPUs)


def main():
    bin_dir = os.path.join(sys.argv[1], "bin")
    work = tempfile.mkdtemp(prefix="zen-decomposition-")
    print("| model | cluster | GPUs | configuration | chunks attention fwd/bwd, MLP fwd/bwd | auto | "
          "tp-nodecomp | tp-asynctp | tp-uniform | auto vs nodecomp |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, layers, hidden, heads in MODELS:
        model = os.path.join(work, f"{layers}x{hidden}.onnx")
        subprocess.run([os.path.join(bin_dir, "zenopt-modelgen"), "gpt", "--layers", str(layers), "--hidden",
                        str(hidden), "--heads", str(heads), "--vocab", "51200", "--seq", "2048", "-o", model],
                       check=True)
        for cluster, nodes in CLUSTERS:
            result = subprocess.run([os.path.join(bin_dir, "zenopt"), model, "--cluster", cluster, "--nodes",
                                     str(nodes), "--precision", "bf16", "--tp", "8", "--global-batch", "1536",
                                     "--json", "-q"], capture_output=True, text=True)
            if result.returncode != 0:
                print(f"| {name} | {cluster} | {nodes * 8} | {result.stderr.strip()} | | | | | | |")
                continue
            s = json.loads(result.stdout)
            p, b, d = s["parallel"], s["baselines"], s["parallel"]["decomposition"]
            auto = s["iteration_us"]
            chunks = (f"{d['attention']['forward']}/{d['attention']['backward']}, "
                      f"{d['mlp']['forward']}/{d['mlp']['backward']}")
            config = f"tp {p['tp']} pp {p['pp']} dp {p['dp']} ZeRO {p['zero']} {p['schedule']}"
            cells = " | ".join(f"{b[n] / 1e3:.0f} ms" if n in b else "n/a"
                               for n in ("tp-nodecomp", "tp-asynctp", "tp-uniform"))
            print(f"| {name} | {cluster} | {nodes * 8} | {config} | {chunks} | {auto / 1e3:.0f} ms | {cells} | "
                  f"{b['tp-nodecomp'] / auto:.3f}x |")


if __name__ == "__main__":
    main()
