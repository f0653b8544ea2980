"""Serving predictions against published throughput (issue 41).

  python3 bench/serving/published.py BUILD_DIR

TensorRT-LLM's performance table (NVIDIA/TensorRT-LLM release/0.5.0, docs/source/performance.md,
"A100 GPUs (FP16)"): LLaMA 7B at a fixed batch and tp 1, output tokens per second at four
input/output lengths. zenopt plans the same configuration (`--serve --tp 1 --pp 1
--max-batch B --precision fp16`, cluster a100x8: A100-SXM4-80GB) and predicts tokens/s per GPU;
no constant is fitted to a row. Then zenopt's own choices for Llama-2-70B and a Mixtral-shaped
MoE on an a100x8 node and an h100x256 node, with the vllm-default and nccl-only baselines.
"""
import json
import os
import subprocess
import sys
import tempfile

LLAMA7B = ["llama", "--layers", "32", "--hidden", "4096", "--heads", "32", "--ffn", "11008",
           "--vocab", "32000", "--seq", "4096"]
LLAMA70B = ["llama", "--layers", "80", "--hidden", "8192", "--heads", "64", "--kv-heads", "8",
            "--ffn", "28672", "--vocab", "32000", "--seq", "4096"]
MIXTRAL = ["mixtral", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
           "--ffn", "14336", "--expert-ffn", "14336", "--experts", "8", "--top-k", "2",
           "--vocab", "32000", "--seq", "4096"]
# (batch, input, output, published output tokens/s on one A100, tp 1)
TRTLLM_A100_LLAMA7B = [(64, 128, 128, 3486), (32, 128, 2048, 1459), (32, 2048, 128, 529),
                       (16, 2048, 2048, 592)]


def zenopt(build, *args):
    out = subprocess.run([os.path.join(build, "bin", "zenopt"), *args, "-q", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    build = sys.argv[1]
    work = tempfile.mkdtemp(prefix="zen-serve-published-")
    models = {}
    for name, shape in (("llama7b", LLAMA7B), ("llama70b", LLAMA70B), ("mixtral", MIXTRAL)):
        models[name] = os.path.join(work, name + ".onnx")
        subprocess.run([os.path.join(build, "bin", "zenopt-modelgen"), *shape, "-o", models[name]], check=True)

    print("TensorRT-LLM 0.5.0, LLaMA 7B, A100 FP16, tp 1, fixed batch")
    print()
    print("| batch | input | output | published tokens/s | predicted tokens/s | error | predicted batch (memory) |")
    print("|---|---|---|---|---|---|---|")
    errors = []
    for batch, prompt, output, published in TRTLLM_A100_LLAMA7B:
        s = zenopt(build, models["llama7b"], "--serve", "--cluster", "a100x8", "--tp", "1", "--pp", "1",
                   "--precision", "fp16", "--max-batch", str(batch), "--prompt-tokens", str(prompt),
                   "--output-tokens", str(output))["inference"]
        predicted = s["tokens_per_s_per_gpu"]
        errors.append(abs(predicted / published - 1))
        print(f"| {batch} | {prompt} | {output} | {published} | {predicted:.0f} | "
              f"{(predicted / published - 1) * 100:+.1f}% | {s['max_batch']} |")
    print(f"\nworst |error| {max(errors) * 100:.1f}%")

    print()
    print("zenopt's choice, prompt 1024, output 256, TPOT target 50 ms, bf16")
    print()
    print("| model | cluster | configuration | batch | TTFT (ms) | TPOT (ms) | tokens/s/GPU | decode all-reduce | vllm-default tokens/s/GPU (config) | nccl-only tokens/s/GPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in ("llama70b", "mixtral"):
        for cluster in ("a100x8", "h100x256"):
            s = zenopt(build, models[model], "--serve", "--cluster", cluster, "--tpot-ms", "50")
            i = s["inference"]
            shape = (f"prefill tp {i['prefill']['tp']} / decode tp {i['decode']['tp']}, disaggregated"
                     if i["disaggregated"] else f"tp {i['decode']['tp']} x pp {i['decode']['pp']}")
            vllm = s["baselines"]["vllm-default"]
            ar = i["allreduce"]["decode"]
            print(f"| {model} | {cluster} | {shape} | {i['max_batch']} | {i['ttft_us'] / 1e3:.1f} | "
                  f"{i['tpot_us'] / 1e3:.1f} | {i['tokens_per_s_per_gpu']:.0f} | {ar['kernel']} {ar['bytes'] / 1e6:.2f} MB "
                  f"{ar['us']:.1f} us | {vllm['tokens_per_s_per_gpu']:.0f} (tp {vllm['decode']['tp']}, batch "
                  f"{vllm['max_batch']}) | {s['baselines']['nccl-only']['tokens_per_s_per_gpu']:.0f} |")


if __name__ == "__main__":
    main()
