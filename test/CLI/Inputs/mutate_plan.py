"""Writes a broken copy of a plan file: mutate_plan.py IN OUT MUTATION."""
import json
import sys

source, target, mutation = sys.argv[1:4]
plan = json.load(open(source))
text = None
if mutation == "format_version":
    plan["format_version"] = 2
elif mutation == "missing_field":
    del plan["predictions"]["iteration_us"]
elif mutation == "unknown_field":
    plan["buckets"][0]["colour"] = "red"
elif mutation == "duplicate_key":
    text = json.dumps(plan, indent=1).replace('"strategy":', '"strategy": "ddp",\n "strategy":', 1)
elif mutation == "nan":
    text = json.dumps(plan, indent=1).replace('"iteration_us": ', '"iteration_us": NaN, "x": ', 1)
elif mutation == "unknown_tensor":
    plan["buckets"][0]["tensors"][0]["name"] = "no.such.tensor"
elif mutation == "tensor_in_two_buckets":
    plan["buckets"][1]["tensors"][0]["name"] = plan["buckets"][0]["tensors"][0]["name"]
elif mutation == "zero_chunks":
    plan["buckets"][0]["collectives"][0]["chunks"] = 0
elif mutation == "parallel_world":
    plan["parallel"]["dp"] += 1
elif mutation == "parallel_stages":
    plan["parallel"]["stages"].pop()
elif mutation == "parallel_memory":
    del plan["parallel"]["memory"]["weights_bytes"]
elif mutation == "parallel_recompute":
    plan["parallel"]["recompute"] = "sometimes"
elif mutation == "parallel_schedule":
    plan["parallel"]["schedule"] = "interleaved:x"
elif mutation == "parallel_stage_time":
    del plan["parallel"]["stages"][0]["p2p_us"]
elif mutation == "parallel_decomposition":
    plan["parallel"]["decomposition"]["mlp"]["backward"] = 0
elif mutation == "parallel_not_object":
    plan["parallel"] = [1]
elif mutation == "parallel_moe_ep":
    plan["parallel"]["moe"]["ep"] = 3
elif mutation == "parallel_moe_etp":
    plan["parallel"]["moe"]["expert_tensor_parallel"] = 3
elif mutation == "parallel_moe_blocks":
    plan["parallel"]["moe"]["blocks"] = "1,3"
elif mutation == "parallel_moe_capacity":
    plan["parallel"]["moe"]["capacity"] = 0
elif mutation == "parallel_moe_tokens":
    plan["parallel"]["moe"]["token_compression"] = "topk"
elif mutation == "parallel_moe_all_to_all":
    plan["parallel"]["moe"]["all_to_all"] = "ring"
elif mutation == "moe_ep":
    plan["moe"]["ep"] = 3
elif mutation == "moe_degree":
    plan["moe"]["layers"][0]["forward"] = plan["moe"]["layers"][0]["capacity"] + 1
elif mutation == "moe_degree_divide":
    plan["moe"]["layers"][0]["backward"] = 3
elif mutation == "moe_all_to_all":
    plan["moe"]["baselines"]["tutel"]["layers"][0]["all_to_all"] = "ring"
elif mutation == "moe_baseline":
    del plan["moe"]["baselines"]["pipemoe"]
elif mutation == "moe_tokens":
    plan["moe"]["layers"][0]["token_compression"] = "topk"
elif mutation == "moe_gradient_sync":
    plan["moe"]["layers"][0]["gradient_sync"] = "later"
elif mutation == "moe_not_fitting":
    plan["moe"]["not_fitting"] = [1, 2]
elif mutation == "moe_other_activations":
    plan["moe"]["memory"]["other_activations_bytes"] = -1.0
elif mutation == "moe_sync_saving":
    plan["moe"]["sync_saving_us"] = None
elif mutation == "moe_schedule_us":
    plan["moe"]["schedule_us"] = -1.0
elif mutation == "moe_timeline":
    plan["moe"]["timeline"][3]["kind"] = "sleep"
elif mutation == "moe_no_timeline":
    del plan["moe"]["timeline"]
elif mutation == "moe_timeline_names":
    for i, task in enumerate(plan["moe"]["timeline"]):
        task["name"] = "task{}".format(len(plan["moe"]["timeline"]) - i)
elif mutation == "moe_timeline_phase":
    plan["moe"]["timeline"][3]["phase"] = "sleeping"
elif mutation == "moe_timeline_layer":
    task = plan["moe"]["timeline"][-1]
    task["moe_layer"] = len(plan["moe"]["layers"])
elif mutation == "moe_timeline_schedule_task":
    task = plan["moe"]["timeline"][0]
    task["schedule_task"] = len(plan["schedule"])
elif mutation == "moe_timeline_both":
    plan["moe"]["timeline"][0]["moe_layer"] = 0
elif mutation == "moe_imbalance":
    plan["moe"]["imbalance"] = 0.5
elif mutation == "moe_unknown":
    plan["moe"]["degree"] = 2
else:
    raise SystemExit("unknown mutation " + mutation)
with open(target, "w") as f:
    f.write(text if text is not None else json.dumps(plan, indent=1))
