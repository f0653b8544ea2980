"""Checks a large-model plan's Chrome trace against its plan file: one row per
pipeline stage holding every micro-batch's forward and backward in the stage's
program order without overlap, ending where the plan's pipeline ends, and the
first stage's gradient collectives after its last backward."""
import json
import sys

plan = json.load(open(sys.argv[1]))
parallel = plan["parallel"]
events = json.load(open(sys.argv[2]))["traceEvents"]
rows = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
print("rows", ", ".join(rows[t] for t in sorted(rows)))

bars = [e for e in events if e["ph"] == "X"]
pp, micro = parallel["pp"], parallel["micro_batches"]
for stage in range(pp):
    steps = sorted((e for e in bars if e["tid"] == stage), key=lambda e: e["ts"])
    assert [e["name"] for e in steps] == parallel["stages"][stage]["program"], stage
    for before, after in zip(steps, steps[1:]):
        assert after["ts"] >= before["ts"] + before["dur"] - 1e-6, (stage, before, after)
    assert sorted(e["name"] for e in steps) == sorted([f"F{m}" for m in range(micro)] + [f"B{m}" for m in range(micro)])
print(f"every stage runs F and B of {micro} micro-batches in its program order without overlap")
chunks = parallel["decomposition"]
for e in bars:
    if e["tid"] < pp:
        phase = "forward" if e["name"].startswith("F") else "backward"
        assert e["args"]["tp_chunks"] == {r: chunks[r][phase] for r in ("attention", "mlp")}, e
print("every step carries its phase's tensor-parallel chunks")

pipeline_end = max(e["ts"] + e["dur"] for e in bars if e["tid"] < pp)
# iteration = pipeline + optimizer step + exposed data-parallel sync.
pipeline_part = parallel["iteration_us"] - parallel["optimizer_us"] - parallel["data_comm_us"]
assert abs(pipeline_end - pipeline_part) <= 0.01 * pipeline_part, (pipeline_end, pipeline_part)
print("the last step ends within 1% of the pipeline part of iteration_us")

last_backward = max(e["ts"] for e in bars if e["tid"] == 0 and e["name"].startswith("B"))
collectives = [e for e in bars if e["cat"] == "collective"]
assert collectives and min(e["ts"] for e in collectives) >= last_backward - 1e-6
print("the first stage's gradient collectives follow its last backward")
