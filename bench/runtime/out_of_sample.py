#!/usr/bin/env python3
"""Predictions from a profile of this machine against measured runs, out of sample (issue 42).

  bench/runtime/out_of_sample.py --build BUILD [--ranks 2,4] [--rounds 3] [--quick-profile]
                                 [--json OUT]

Per rank count: `mpirun -np N zenopt profile` once, then every model x strategy is planned on
that profile (`zenopt MODEL --cluster PROFILE --dp N --strategy S`), its prediction taken from
the plan, and run with `mpirun -np N zenopt-run PLAN --compute gemm` (real CPU GEMMs and memory
passes, real MPI) in `--rounds` rounds, every (model, strategy) once per round in a rotated
order. Nothing is refitted between the profile and the runs. The same plans are also
re-scored on the hand-set `cpu-local` preset (`zenopt simulate PLAN --cluster cpu-local`):
the two predictors of the same measured runs, side by side.

Models: the 24-tensor MLP of bench section 3 (`zenopt-modelgen mlp`), a small CNN exported by
torch at run time (three 3x3 convolutions with batch norm, two linear layers; /usr/bin/python3
with torch), and a 2-block GPT (`zenopt-modelgen gpt`). Prints per rank count and model the
median |measured - predicted| (% of measured), Spearman rho and the fastest strategy
predicted and measured; and per rank count over every (model, strategy).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "report"))
from zenbench import median, spearman  # noqa: E402

STRATEGIES = ["auto", "auto+comp", "nooverlap", "wfbp", "ddp", "horovod", "mgwfbp"]
COMPRESSORS = "fp16,int8,topk:0.01,powersgd:4"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]

CNN_EXPORT = r"""
import sys, torch, torch.nn as nn
class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 4 * 4, 512), nn.ReLU(),
                                  nn.Linear(512, 10))
    def forward(self, x):
        return self.head(self.features(x))
torch.manual_seed(0)
torch.onnx.export(CNN(), torch.randn(16, 3, 32, 32), sys.argv[1], opset_version=13,
                  input_names=["images"], output_names=["logits"])
"""


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout


def models(build, work):
    tool = os.path.join(build, "bin", "zenopt-modelgen")
    paths = {"mlp": os.path.join(work, "mlp.onnx"), "cnn": os.path.join(work, "cnn.onnx"),
             "gpt": os.path.join(work, "gpt.onnx")}
    run([tool, "mlp", "--tensors", "24", "--hidden", "384", "--batch", "32", "-o", paths["mlp"]])
    run(["/usr/bin/python3", "-c", CNN_EXPORT, paths["cnn"]])
    run([tool, "gpt", "--layers", "2", "--hidden", "256", "--heads", "4", "--vocab", "4000",
         "--seq", "64", "-o", paths["gpt"]])
    return paths


def plan(build, model, cluster, ranks, strategy, out):
    cmd = [os.path.join(build, "bin", "zenopt"), model, "--cluster", cluster, "--dp", str(ranks),
           "-o", out, "--json"]
    if strategy == "auto+comp":
        cmd += ["--strategy", "auto", "--compressor", COMPRESSORS]
    else:
        cmd += ["--strategy", strategy]
    summary = json.loads(run(cmd))
    return summary["iteration_us"]


def preset_prediction(build, plan_path):
    summary = json.loads(run([os.path.join(build, "bin", "zenopt"), "simulate", plan_path,
                              "--cluster", "cpu-local", "--json"]))
    return summary["iteration_us"]


def measure(build, plan_path, ranks, iters):
    out = run(MPIRUN + ["-np", str(ranks), os.path.join(build, "bin", "zenopt-run"), plan_path,
                        "--iters", str(iters), "--json", "--compute", "gemm"])
    result = json.loads(out)
    if result["numerics"] != "ok":
        raise RuntimeError(f"{plan_path}: numerics {result['numerics']}")
    return result["measured_iteration_us"]


def agreement(rows):
    predicted = [r["predicted_us"] for r in rows]
    measured = [median(r["measured_us"]) for r in rows]
    preset = [r["preset_us"] for r in rows]
    errors = [abs(m - p) / m * 100 for m, p in zip(measured, predicted)]
    preset_errors = [abs(m - p) / m * 100 for m, p in zip(measured, preset)]
    names = [r["strategy"] for r in rows]
    return {
        "median_abs_error_pct": median(errors),
        "spearman": spearman(predicted, measured),
        "preset_median_abs_error_pct": median(preset_errors),
        "preset_spearman": spearman(preset, measured),
        "fastest_predicted": names[predicted.index(min(predicted))],
        "fastest_measured": names[measured.index(min(measured))],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--quick-profile", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="zen-oos-")
    paths = models(args.build, work)
    report = {}
    for ranks in [int(r) for r in args.ranks.split(",")]:
        profile = os.path.join(work, f"profile-np{ranks}.json")
        run(MPIRUN + ["-np", str(ranks), os.path.join(args.build, "bin", "zenopt"), "profile",
                      "-o", profile] + (["--quick"] if args.quick_profile else []))
        profiled = json.load(open(profile))["profiled"]
        rows = []
        for name, model in paths.items():
            for strategy in STRATEGIES:
                plan_path = os.path.join(work, f"{name}-{strategy}-np{ranks}.json")
                rows.append({"model": name, "strategy": strategy, "plan": plan_path,
                             "predicted_us": plan(args.build, model, profile, ranks, strategy,
                                                  plan_path),
                             "measured_us": []})
                rows[-1]["preset_us"] = preset_prediction(args.build, plan_path)
        for round_index in range(args.rounds):
            shift = round_index * len(rows) // max(args.rounds, 1)
            for row in rows[shift:] + rows[:shift]:
                row["measured_us"].append(measure(args.build, row["plan"], ranks, args.iters))
        by_model = {name: agreement([r for r in rows if r["model"] == name]) for name in paths}
        report[ranks] = {"profile": {k: profiled[k] for k in ("compute", "executor",
                                                                "interference") if k in profiled},
                         "rows": rows, "by_model": by_model, "all": agreement(rows)}
        print(f"\n-np {ranks}: profile interference {profiled.get('interference', {})}")
        print("| model | strategy | predicted (profile) | cpu-local preset | measured (median) | error |")
        print("|:--|:--|--:|--:|--:|--:|")
        for r in rows:
            m = median(r["measured_us"])
            print(f"| {r['model']} | {r['strategy']} | {r['predicted_us'] / 1e3:.2f} ms | "
                  f"{r['preset_us'] / 1e3:.2f} ms | {m / 1e3:.2f} ms | "
                  f"{(r['predicted_us'] - m) / m * 100:+.1f}% |")
        print("\n| model | median abs error | Spearman rho | preset: error, rho | fastest predicted / measured |")
        print("|:--|--:|--:|--:|:--|")
        for name, a in list(by_model.items()) + [("all 21", report[ranks]["all"])]:
            print(f"| {name} | {a['median_abs_error_pct']:.1f}% | {a['spearman']:.2f} | "
                  f"{a['preset_median_abs_error_pct']:.1f}%, {a['preset_spearman']:.2f} | "
                  f"{a['fastest_predicted']} / {a['fastest_measured']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, KeyError) as error:
        print(f"out_of_sample: error: {error}", file=sys.stderr)
        sys.exit(1)
