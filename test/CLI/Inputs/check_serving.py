"""Checks a `zenopt --serve --json` summary (docs/plan-format.md "inference").

  check_serving.py SUMMARY.json [--tpot-ms T] [--ttft-ms T]
      the inference section has its decisions (prefill and decode tp/pp, batch, KV cache),
      predictions and memory, consistent with each other and with the targets, and the
      vllm-default and nccl-only baselines; prints one line per decision for FileCheck.
"""
import argparse
import json
import sys


def fail(message):
    sys.exit("check_serving: " + message)


args = argparse.ArgumentParser()
args.add_argument("summary")
args.add_argument("--tpot-ms", type=float, default=0)
args.add_argument("--ttft-ms", type=float, default=0)
a = args.parse_args()
with open(a.summary) as f:
    s = json.load(f)
if s["strategy"] != "serve":
    fail(f"strategy {s['strategy']}")
i = s["inference"]
for phase in ("prefill", "decode"):
    for key in ("tp", "pp"):
        if not isinstance(i[phase][key], int) or i[phase][key] < 1:
            fail(f"{phase}.{key} = {i[phase][key]}")
gpus = i["prefill"]["tp"] * i["prefill"]["pp"] + i["decode"]["tp"] * i["decode"]["pp"] \
    if i["disaggregated"] else i["decode"]["tp"] * i["decode"]["pp"]
if i["gpus_per_instance"] != gpus or s["world_size"] != gpus:
    fail(f"gpus_per_instance {i['gpus_per_instance']}, world_size {s['world_size']}, expected {gpus}")
if not 1 <= i["max_batch"] <= 256:
    fail(f"max_batch {i['max_batch']}")
blocks_per_request = -(-i["max_sequence"] // i["kv_block_tokens"])
if i["kv_cache_blocks"] < i["max_batch"] * blocks_per_request:
    fail(f"{i['kv_cache_blocks']} KV blocks do not hold {i['max_batch']} requests of {blocks_per_request}")
m = i["memory"]
parts = ["weights_bytes", "kv_cache_bytes", "activations_bytes", "buffers_bytes", "reserve_bytes"]
if abs(sum(m[p] for p in parts) - m["per_gpu_bytes"]) > 1e-6 * m["per_gpu_bytes"]:
    fail("memory parts do not add up")
if m["capacity_bytes"] and m["per_gpu_bytes"] > m["capacity_bytes"]:
    fail("memory over capacity")
if i["meets_targets"]:
    if a.tpot_ms and i["tpot_us"] > a.tpot_ms * 1e3:
        fail(f"TPOT {i['tpot_us']} us over the target")
    if a.ttft_ms and i["ttft_us"] > a.ttft_ms * 1e3:
        fail(f"TTFT {i['ttft_us']} us over the target")
if i["ttft_us"] < i["prefill_us"] or i["tpot_us"] < i["decode_step_us"]:
    fail("TTFT/TPOT below their prefill/decode step")
for phase in ("prefill", "decode"):
    ar = i["allreduce"][phase]
    if ar["kernel"] not in ("none", "nccl", "one-shot", "two-shot"):
        fail(f"{phase} all-reduce kernel {ar['kernel']}")
    if ar["kernel"] != "none":
        priced = {"nccl": ar["nccl_us"], "one-shot": ar.get("one_shot_us"), "two-shot": ar.get("two_shot_us")}
        if ar["us"] != priced[ar["kernel"]] or ar["us"] > min(v for v in priced.values() if v is not None):
            fail(f"{phase} all-reduce: {ar['kernel']} is not the cheapest of {priced}")
tokens = i["tokens_per_s_per_gpu"]
for name in ("vllm-default", "nccl-only"):
    b = s["baselines"].get(name)
    if b is None or not b["rule"]:
        fail(f"no {name} baseline")
    if abs(s["speedup_over"][name] - tokens / b["tokens_per_s_per_gpu"]) > 1e-9 * s["speedup_over"][name]:
        fail(f"speedup over {name}")
print(f"prefill: tp {i['prefill']['tp']} pp {i['prefill']['pp']}")
print(f"decode: tp {i['decode']['tp']} pp {i['decode']['pp']}")
print(f"disaggregated: {str(i['disaggregated']).lower()}")
print(f"meets targets: {str(i['meets_targets']).lower()}")
print(f"decode all-reduce: {i['allreduce']['decode']['kernel']}")
print(f"baselines: {', '.join(sorted(s['baselines']))}")
