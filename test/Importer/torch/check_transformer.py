"""Checks the `transformer` object of zenopt's JSON (inspect --json or a plan's --json summary,
read from stdin) against the module configuration in a torch export's truth file.

usage: check_transformer.py TRUTH.json

Every field of the truth's `transformer` (blocks, hidden, heads, kv_heads, ffn, vocab, seq, mlp,
norm, tied_embeddings, positions, moe_blocks) must match, and the parameters the shape counts
must be the truth's elements. A truth without a transformer needs the object absent. Prints one
line per field and exits 1 if any differs.
"""
import json
import sys


def main():
    report = json.load(sys.stdin)
    with open(sys.argv[1]) as f:
        truth = json.load(f)
    expected = truth["transformer"]
    found = report.get("transformer")
    if expected is None:
        print("OK no transformer" if found is None else f"FAIL transformer {found} (truth: none)")
        return 0 if found is None else 1
    if found is None:
        print("FAIL no transformer object")
        return 1
    ok = True
    for field, value in sorted(expected.items()):
        good = found.get(field) == value
        ok &= good
        print(("OK " if good else "FAIL ") + f"{field}: {found.get(field)!r} (truth {value!r})")
    good = found.get("parameters") == truth["elements"]
    ok &= good
    print(("OK " if good else "FAIL ") + f"parameters: {found.get('parameters')} (truth {truth['elements']})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
