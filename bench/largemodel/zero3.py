#!/usr/bin/env python3
"""ZeRO-3 / FSDP fidelity against published scaling runs.

Forces the configurations of MosaicML's llm-foundry benchmark table
(github.com/mosaicml/llm-foundry, scripts/train/benchmarking/README.md, "A100 40GB with 1600 Gbps
node-node interconnect (RoCE)" and "A100 80GB with 1600 Gbps" tables): MPT models trained with
Composer's FSDP FULL_SHARD (ZeRO-3, gathered per micro-batch), bf16, activation checkpointing
(full recomputation), FlashAttention, sequence 2048, the micro-batch and global batch of each
row. The models are zenopt-modelgen GPTs of MPT's shapes (MPT ties its embedding and has no
biases; modelgen's head is untied: V h more parameters to gather, 3% of the 7B model). The
cluster is the a100x64 preset's sourced figures with the A100-SXM4-40GB's memory (40 GiB) and
HBM bandwidth (1555 GB/s, NVIDIA A100 datasheet) where the row ran on 40 GB GPUs; 8 GPUs and
8 x 200 Gb/s NICs per node (1600 Gbps a node, as the table states). No constant is fitted to a
row. Prints a Markdown table: published and predicted tokens/s per GPU, the error, predicted
MFU against published MFU, the exposed ZeRO communication and memory per GPU.

Also prints, for the same rows, what gathering once a step (--zero3-regather per-step) would
need; a network-bound case (the 7B model on 128 A100 80GB with one 100 Gb/s NIC a node) where
re-gathering per micro-batch costs; and the sharded model state against torchtitan's measured
peak memory of Llama 3.1 8B under FSDP on 8 and on 128 H100s (pytorch/torchtitan,
benchmarks/llama3_h100_202412_torchtitan.md, tables 1 and 3: 82.4 and 67.0 GiB, local batch 2):
the activations are the same on both, so the difference is the sharded state.

GPU memory: NVIDIA's "40GB" and "80GB" are GiB (40960 and 81920 MiB); memory_gb counts 1e9
bytes, so the derived clusters give 42.9 and 85.9.

usage: zero3.py BUILD_DIR
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

# name, layers, hidden, heads, GPUs, micro-batch, global batch, GPU memory (GB), published
# tokens/s per GPU, published MFU (%)
ROWS = [
    ("MPT-7B", 32, 4096, 32, 8, 12, 384, 40, 3679, 50.92),
    ("MPT-7B", 32, 4096, 32, 16, 16, 256, 40, 3645, 50.44),
    ("MPT-7B", 32, 4096, 32, 32, 18, 576, 40, 3725, 51.55),
    ("MPT-7B", 32, 4096, 32, 64, 18, 1152, 40, 3665, 50.73),
    ("MPT-7B", 32, 4096, 32, 128, 18, 2304, 40, 3623, 50.14),
    ("MPT-13B", 40, 5120, 40, 8, 4, 512, 40, 1668, 43.94),
    ("MPT-13B", 40, 5120, 40, 16, 10, 160, 40, 1993, 52.5),
    ("MPT-13B", 40, 5120, 40, 32, 14, 448, 40, 1998, 52.62),
    ("MPT-13B", 40, 5120, 40, 64, 16, 1024, 40, 1976, 52.04),
    ("MPT-13B", 40, 5120, 40, 128, 16, 2048, 40, 1972, 51.93),
    ("MPT-30B", 48, 7168, 64, 32, 4, 128, 40, 857, 51.74),
    ("MPT-30B", 48, 7168, 64, 128, 6, 768, 40, 865, 52.25),
    ("MPT-70B", 80, 8192, 64, 64, 2, 128, 40, 276, 35.87),
    ("MPT-70B", 80, 8192, 64, 128, 4, 512, 40, 376, 48.91),
    ("MPT-70B", 80, 8192, 64, 32, 2, 1024, 80, 373, 48.56),
    ("MPT-70B", 80, 8192, 64, 64, 8, 2048, 80, 410, 53.33),
]
SEQ, VOCAB = 2048, 50368


def preset(name):
    """A cluster preset (comments stripped)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "costmodel", "presets",
                        name + ".json")
    text = open(path).read()
    return json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))


def cluster_file(work, memory_gb, gpus, nic_gbps=None, nics=None):
    cluster = preset("a100x64")
    cluster["name"] = f"a100-{memory_gb}gb-x{gpus}"
    cluster["nodes"] = gpus // 8
    cluster["gpu"]["memory_gb"] = memory_gb * 2**30 / 1e9
    if memory_gb == 40:
        # A100-SXM4-40GB: HBM2 at 1555 GB/s.
        cluster["gpu"].update(name="A100-SXM4-40GB", hbm_bandwidth_gbps=1555)
    if nic_gbps:
        cluster["inter_node"].update(bandwidth_gbps=nic_gbps, nics_per_node=nics)
        cluster["name"] += f"-{nics}nic"
    path = os.path.join(work, cluster["name"] + ".json")
    json.dump(cluster, open(path, "w"))
    return path


def plan(bin_dir, model, cluster, gpus, micro, batch, *extra):
    result = subprocess.run(
        [os.path.join(bin_dir, "zenopt"), model, "--cluster", cluster, "--precision", "bf16", "--tp", "1",
         "--pp", "1", "--dp", str(gpus), "--zero", "3", "--micro-batch", str(micro), "--global-batch",
         str(batch), "--recompute", "full", "--json", "-q", *extra], capture_output=True, text=True)
    if result.returncode == 65:
        needs = re.search(r"needs ([0-9.]+) GB per GPU", result.stderr)
        return {"nofit": needs.group(1) if needs else result.stderr.strip()}
    result.check_returncode()
    return json.loads(result.stdout)


def main():
    bin_dir = os.path.join(sys.argv[1], "bin")
    work = tempfile.mkdtemp(prefix="zen-zero3-")
    models = {}
    print("| model | GPU | GPUs | micro-batch | global batch | published tokens/s/GPU | predicted | error | "
          "MFU published | MFU predicted | exposed ZeRO comm | memory per GPU (GB) | gathered once a step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for name, layers, hidden, heads, gpus, micro, batch, memory, published, mfu in ROWS:
        if name not in models:
            models[name] = os.path.join(work, name + ".onnx")
            subprocess.run([os.path.join(bin_dir, "zenopt-modelgen"), "gpt", "--layers", str(layers), "--hidden",
                            str(hidden), "--heads", str(heads), "--vocab", str(VOCAB), "--seq", str(SEQ), "-o",
                            models[name]], check=True)
        cluster = cluster_file(work, memory, gpus)
        s = plan(bin_dir, models[name], cluster, gpus, micro, batch)
        per_step = plan(bin_dir, models[name], cluster, gpus, micro, batch, "--zero3-regather", "per-step")
        if "nofit" in per_step:
            step_text = f"needs {per_step['nofit']} GB"
        else:
            step_text = f"{batch * SEQ / (per_step['iteration_us'] / 1e6) / gpus:.0f} tokens/s/GPU"
        if "nofit" in s:
            print(f"| {name} | A100 {memory}GB | {gpus} | {micro} | {batch} | {published} | does not fit: needs "
                  f"{s['nofit']} GB | | {mfu} | | | | {step_text} |")
            continue
        tokens = batch * SEQ / (s["iteration_us"] / 1e6) / gpus
        error = tokens / published - 1
        errors.append(abs(error))
        print(f"| {name} | A100 {memory}GB | {gpus} | {micro} | {batch} | {published} | {tokens:.0f} | "
              f"{100 * error:+.1f}% | {mfu} | {100 * s['mfu']:.1f} | "
              f"{100 * s['exposed_comm_us'] / s['iteration_us']:.1f}% | "
              f"{s['memory']['per_gpu_bytes'] / 1e9:.1f} of {s['memory']['capacity_bytes'] / 1e9:.1f} | {step_text} |")
    if errors:
        print(f"\nworst |error| {100 * max(errors):.1f}%, median {100 * statistics.median(errors):.1f}% "
              f"over {len(errors)} rows\n")

    # Where re-gathering costs: the 7B model on 16 nodes with one 100 Gb/s NIC each.
    print("| MPT-7B, 128 A100 80GB, micro-batch 2, global batch 2048, one 100 Gb/s NIC a node | iteration | "
          "exposed ZeRO comm | memory per GPU (GB) |")
    print("|---|---|---|---|")
    cluster = cluster_file(work, 80, 128, nic_gbps=12.5, nics=1)
    for regather in ("per-microbatch", "per-step"):
        s = plan(bin_dir, models["MPT-7B"], cluster, 128, 2, 2048, "--zero3-regather", regather)
        if "nofit" in s:
            print(f"| {regather} | does not fit: needs {s['nofit']} GB | | |")
            continue
        print(f"| {regather} | {s['iteration_us'] / 1e3:.0f} ms | {s['exposed_comm_us'] / 1e3:.0f} ms | "
              f"{s['memory']['per_gpu_bytes'] / 1e9:.1f} |")

    # torchtitan's Llama 3.1 8B under FSDP, 8 against 128 H100s: the sharded state.
    llama = os.path.join(work, "llama3-8b.onnx")
    subprocess.run([os.path.join(bin_dir, "zenopt-modelgen"), "llama", "--layers", "32", "--hidden", "4096",
                    "--heads", "32", "--kv-heads", "8", "--ffn", "14336", "--vocab", "128256", "--seq", "8192",
                    "-o", llama], check=True)
    memory = {}
    for gpus in (8, 128):
        cluster = preset("h100x256")
        cluster.update(name=f"h100-x{gpus}", nodes=gpus // 8)
        cluster["gpu"]["memory_gb"] = 1000  # the state is compared, not the fit
        path = os.path.join(work, cluster["name"] + ".json")
        json.dump(cluster, open(path, "w"))
        memory[gpus] = plan(bin_dir, llama, path, gpus, 2, 2 * gpus)["memory"]
    state = lambda m: m["weights_bytes"] + m["gradients_bytes"] + m["optimizer_bytes"]
    predicted = (memory[8]["per_gpu_bytes"] - memory[128]["per_gpu_bytes"]) / 2**30
    published = 82.4 - 67.0
    print(f"\n| Llama 3.1 8B FSDP, local batch 2 | 8 H100 | 128 H100 | difference |")
    print("|---|---|---|---|")
    print(f"| published peak memory (GiB) | 82.4 | 67.0 | {published:.1f} |")
    print(f"| predicted sharded state (GiB) | {state(memory[8]) / 2**30:.1f} | {state(memory[128]) / 2**30:.1f} | "
          f"{(state(memory[8]) - state(memory[128])) / 2**30:.1f} |")
    print(f"| predicted per GPU (GiB) | {memory[8]['per_gpu_bytes'] / 2**30:.1f} | "
          f"{memory[128]['per_gpu_bytes'] / 2**30:.1f} | {predicted:.1f} ({100 * (predicted / published - 1):+.1f}%) |")

if __name__ == "__main__":
    main()
