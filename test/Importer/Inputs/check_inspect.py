"""Checks `zenopt inspect --json` (read from stdin) against a model's truth file and
hand-calculated FLOPs.

usage: check_inspect.py TRUTH.json [--flops OP[,OP...]=VALUE]... [--tolerance FRACTION]

Prints one line per check and exits 1 if any fails: trainable tensor and element counts
must equal the truth exactly; the forward FLOPs summed over the listed op types must be
within the tolerance (default 2%) of VALUE.
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("truth")
    parser.add_argument("--flops", action="append", default=[])
    parser.add_argument("--tolerance", type=float, default=0.02)
    args = parser.parse_args()
    report = json.load(sys.stdin)
    with open(args.truth) as f:
        truth = json.load(f)
    ok = True

    def check(name, good, detail):
        nonlocal ok
        ok &= good
        print(("OK " if good else "FAIL ") + name + ": " + detail)

    check("trainable_tensors", report["trainable_tensors"] == truth["parameters"],
          "%d (truth %d)" % (report["trainable_tensors"], truth["parameters"]))
    check("trainable_elements", report["trainable_elements"] == truth["elements"],
          "%d (truth %d)" % (report["trainable_elements"], truth["elements"]))
    check("gradients", len(report["gradients"]) == truth["parameters"] and
          sorted(g["ready_order"] for g in report["gradients"]) ==
          list(range(truth["parameters"])),
          "%d gradients with ready orders 0..n-1" % len(report["gradients"]))
    for spec in args.flops:
        ops, expected = spec.split("=")
        expected = float(eval(expected, {"__builtins__": {}}))
        measured = sum(report["flops_by_op_type"].get(op, 0) for op in ops.split(","))
        error = abs(measured - expected) / expected
        check("flops " + ops, error <= args.tolerance,
              "%d vs hand %d (%.3f%%)" % (measured, expected, 100 * error))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
