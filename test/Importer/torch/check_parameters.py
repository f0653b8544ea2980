"""Checks `zenopt inspect --json` (read from stdin) against a torch export's truth file.

usage: check_parameters.py TRUTH.json [NAME=RULE ...]

The trainable tensors and elements must equal the truth's (sum(p.numel() for p in
model.parameters())), the gradients must be named as the model's parameters, and the
constants must be exactly NAME=RULE pairs given (in any order). Prints one line per check
and exits 1 if any fails.
"""
import json
import sys


def main():
    truth_path, expected = sys.argv[1], sys.argv[2:]
    report = json.load(sys.stdin)
    with open(truth_path) as f:
        truth = json.load(f)
    ok = True

    def check(name, good, detail):
        nonlocal ok
        ok &= good
        print(("OK " if good else "FAIL ") + name + ": " + detail)

    check("trainable_tensors", report["trainable_tensors"] == truth["tensors"],
          f"{report['trainable_tensors']} (truth {truth['tensors']})")
    check("trainable_elements", report["trainable_elements"] == truth["elements"],
          f"{report['trainable_elements']} (truth {truth['elements']})")
    names = sorted(gradient["name"] for gradient in report["gradients"])
    check("parameter names", names == truth["parameters"],
          "as the model's" if names == truth["parameters"] else
          f"differ in {sorted(set(names) ^ set(truth['parameters']))}")
    constants = sorted(f"{c['name']}={c['rule']}" for c in report["constants"])
    check("constants", constants == sorted(expected), " ".join(constants) or "none")
    frozen_weights = sorted({c["name"] for c in report["constants"]} & set(truth["parameters"]))
    check("no parameter frozen", not frozen_weights, ", ".join(frozen_weights) or "none")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
