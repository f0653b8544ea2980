"""Prints the `transformer` object of an `inspect --json` or plan `--json` output as
"key value" pairs in the contract's order, or "no transformer"; with a second file, asserts
both carry the same object."""
import json
import sys

KEYS = ["blocks", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "mlp", "norm",
        "tied_embeddings", "positions", "moe_blocks"]

first = json.load(open(sys.argv[1]))
if len(sys.argv) > 2:
    second = json.load(open(sys.argv[2]))
    assert first.get("transformer") == second.get("transformer"), (first.get("transformer"),
                                                                   second.get("transformer"))
if "transformer" not in first:
    print("no transformer")
else:
    t = first["transformer"]
    print(" ".join("{} {}".format(k, json.dumps(t[k])) for k in KEYS))
