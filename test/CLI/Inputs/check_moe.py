"""Checks an MoE `zenopt --json` summary against its plan file: the summary's
`moe` keys, every layer's degrees, algorithm and token compression as the plan's
`moe` section has them (the baselines never compress), the chosen ep the fastest of those searched, the whole iteration the
data-parallel one moved by the MoE decisions, the expert tensors synchronised over their
replicas in the plan's buckets, and the MoE baselines present.
Prints ep, each layer's decisions and the baselines' names.
With MODEL.mlir (`zenopt --emit mlir`), also checks that each layer's three
MoE ops carry the plan's #zen.moe_schedule.
Usage: check_moe.py SUMMARY.json PLAN.json [MODEL.mlir]"""
import json
import re
import sys

summary = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
moe, section = summary["moe"], plan["moe"]
assert sorted(moe) == sorted(["ep", "imbalance", "moe_us", "expert_sync_us", "sync_saving_us",
                              "layers", "searched", "not_fitting", "memory"]), sorted(moe)
assert moe["ep"] == section["ep"]
assert [l["name"] for l in moe["layers"]] == [l["name"] for l in section["layers"]]
for mine, theirs in zip(moe["layers"], section["layers"]):
    for key in ["forward", "backward", "all_to_all", "token_compression", "gradient_sync"]:
        assert mine[key] == theirs[key], (key, mine, theirs)
    assert 1 <= mine["forward"] <= theirs["capacity"] and 1 <= mine["backward"] <= theirs["capacity"]
    assert theirs["experts"] % moe["ep"] == 0
# The chosen ep has the least predicted iteration of every ep tried.
assert section["searched"][str(moe["ep"])] == min(section["searched"].values()), section["searched"]
assert summary["iteration_us"] == section["iteration_us"]
# The co-scheduled iteration counts from the schedule the MoE planner simulated (the
# experts priced as the IR prices them, every gradient over dp); the plan's own is that
# schedule with the expert gradients over their replicas, what the saving was counted on.
assert abs(section["schedule_us"] - section["sync_saving_us"] -
           plan["predictions"]["iteration_us"]) <= 1e-9 * section["schedule_us"], \
    (section["schedule_us"], section["sync_saving_us"], plan["predictions"])
# Over their replicas: every expert tensor is one rank's experts / ep of it, alone in
# expert_replicas buckets (at ep 1 there are none).
experts = {name for layer in section["layers"] for name in layer["parameters"]}
bucket_of = {t["name"]: b for b in plan["buckets"] for t in b["tensors"]}
for tensor in plan["tensors"]:
    expert = tensor["name"] in experts and section["ep"] > 1
    assert tensor.get("expert_parallel", 1) == (section["ep"] if expert else 1), tensor
    assert bucket_of[tensor["name"]].get("group", "data_parallel") == \
        ("expert_replicas" if expert else "data_parallel"), (tensor, bucket_of[tensor["name"]])
assert section["iteration_us"] == section["searched"][str(section["ep"])]
# The saving is the schedule re-simulated with the expert gradients over their replicas:
# nothing at ep 1, and it cannot take off more than the whole schedule.
assert section["ep"] > 1 or section["sync_saving_us"] == 0, section["sync_saving_us"]
assert section["sync_saving_us"] < section["schedule_us"], section["sync_saving_us"]
for name in ["moe-nopipe", "tutel", "pipemoe"]:
    assert summary["baselines"][name] == section["baselines"][name]["iteration_us"], name
    assert all(l["token_compression"] == "none" and l["gradient_sync"] == "concurrent"
               for l in section["baselines"][name]["layers"])
print("ep", moe["ep"], "searched", " ".join(sorted(section["searched"], key=int)))
for layer in moe["layers"]:
    print("layer {name} forward {forward} backward {backward} all_to_all {all_to_all} "
          "tokens {token_compression} gradient_sync {gradient_sync}".format(**layer))
for name in ["moe-nopipe", "tutel", "pipemoe"]:
    layers = section["baselines"][name]["layers"]
    print(name, " ".join("{}/{}/{}".format(l["forward"], l["backward"], l["all_to_all"])
                         for l in layers))
if len(sys.argv) > 3:
    found = re.findall(r"zen\.moe_(?:dispatch|experts|combine) .*schedule = (#zen\.moe_schedule<[^>]*>)",
                       open(sys.argv[3]).read())
    expected = []
    for layer in section["layers"]:
        tokens, sync = layer["token_compression"], layer["gradient_sync"]
        expected += ['#zen.moe_schedule<ep = {}, forward = {}, backward = {}, all_to_all = "{}"{}{}>'.format(
            section["ep"], layer["forward"], layer["backward"], layer["all_to_all"],
            "" if tokens == "none" else ', tokens = "{}"'.format(tokens),
            "" if sync == "concurrent" else ', gradient_sync = "{}"'.format(sync))] * 3
    assert found == expected, (found, expected)
    print("schedules on", len(found), "MoE ops agree with the plan")
