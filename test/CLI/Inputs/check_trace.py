"""Checks a Chrome trace against the plan it was made from."""
import json
import sys

trace = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
events = trace["traceEvents"]
complete = [e for e in events if e["ph"] == "X"]
assert len(complete) == len(plan["schedule"]), (len(complete), len(plan["schedule"]))
tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
assert "compute" in tracks and "comm stream 0" in tracks, tracks
for event in complete:
    assert event["dur"] >= 0 and event["ts"] >= 0
    if event["cat"] == "collective":
        assert event["tid"] >= 1
        for key in ("bucket", "bytes", "compression", "algorithm", "op"):
            assert key in event["args"], (key, event)
    else:
        assert event["tid"] == 0
print("ok", len(complete), "events")
