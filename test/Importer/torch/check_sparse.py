"""Checks `zenopt inspect --json` (stdin) against export_sparse.py's truth file.

usage: check_sparse.py NAME.sparse.json

`sparse_gradients` must equal the truth exactly (names, rows, row elements, lookups per
sample, in graph order), and every table the truth says stays dense must be listed in
`gathered_dense_gradients` and absent from `sparse_gradients`. Exits 1 on any difference.
"""
import json
import sys


def main():
    report = json.load(sys.stdin)
    with open(sys.argv[1]) as f:
        truth = json.load(f)
    ok = True
    if report["sparse_gradients"] != truth["sparse_gradients"]:
        ok = False
        print("FAIL sparse_gradients:", report["sparse_gradients"], "truth", truth["sparse_gradients"])
    else:
        print("OK sparse_gradients:", ", ".join(t["name"] for t in truth["sparse_gradients"]))
    dense = sorted(t["name"] for t in report["gathered_dense_gradients"])
    if dense != sorted(truth["dense"]):
        ok = False
        print("FAIL dense:", dense, "truth", truth["dense"])
    else:
        print("OK dense:", ", ".join(dense) or "none")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
