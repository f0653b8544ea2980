#!/usr/bin/env python3
"""An MoE plan's training step on cpu-local, measured against predicted.

Plans `zenopt-modelgen moe` models on cpu-local at `--dp 4` for each ep given (and
zenopt's own choice), then runs each plan under `mpirun -np 4` (test/mpirun.sh) with
`zenopt-run --json`: the data-parallel runner walks the plan's schedule with every
MoE layer's forward and backward at the compute tasks its experts run in, beside the
gradient sync (the expert tensors' buckets over their replicas), then each layer
alone. Prints a markdown table: ep, buckets (of them over the expert replicas), the
plan's predicted schedule (`predictions.iteration_us`) and co-scheduled iteration
(`moe.iteration_us`), the measured step (mean and best after the first, slowest
rank), and the numerics: every bucket against its group's average and the layers in
the step bit for bit against their runs alone.

usage: step.py BUILD_DIR [ITERATIONS]
"""
import json
import os
import subprocess
import sys
import tempfile

# name, zenopt-modelgen moe arguments
MODELS = [
    ("small (4 experts, h 32, ffn 64)",
     ["--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "64", "--seq", "32",
      "--experts", "4", "--top-k", "2", "--capacity-factor", "1", "--expert-ffn", "64",
      "--moe-every", "1"]),
    ("wide (8 experts, h 256, ffn 1024)",
     ["--layers", "2", "--hidden", "256", "--heads", "4", "--vocab", "256", "--seq", "128",
      "--experts", "8", "--top-k", "2", "--capacity-factor", "1", "--expert-ffn", "1024",
      "--moe-every", "2"]),
]
EPS = [None, 2, 4]


def main():
    build = sys.argv[1]
    iterations = sys.argv[2] if len(sys.argv) > 2 else "8"
    here = os.path.dirname(os.path.abspath(__file__))
    mpirun = os.path.join(here, "..", "..", "test", "mpirun.sh")
    binary = lambda name: os.path.join(build, "bin", name)
    print("| model | ep | buckets (experts') | predicted schedule | predicted with MoE layers | "
          "measured step (mean) | measured step (best) | measured / predicted | numerics |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name, arguments in MODELS:
            model = os.path.join(work, "moe.onnx")
            subprocess.run([binary("zenopt-modelgen"), "moe", *arguments, "-o", model],
                           check=True, capture_output=True)
            for ep in EPS:
                plan_path = os.path.join(work, "plan.json")
                command = [binary("zenopt"), model, "--cluster", "cpu-local", "--dp", "4", "-q",
                           "-o", plan_path]
                if ep:
                    command += ["--ep", str(ep)]
                subprocess.run(command, check=True, capture_output=True)
                plan = json.load(open(plan_path))
                run = subprocess.run([mpirun, "-np", "4", binary("zenopt-run"), plan_path,
                                      "--iters", iterations, "--timeout", "300", "--json"],
                                     capture_output=True, text=True)
                report = json.loads(run.stdout)
                step = report["gradient_sync"]
                experts = sum(b.get("group") == "expert_replicas" for b in plan["buckets"])
                ok = run.returncode == 0 and report["numerics"] == "ok" and step["numerics"] == "ok"
                predicted = plan["moe"]["iteration_us"]
                print("| {} | {}{} | {} ({}) | {:.2f} ms | {:.2f} ms | {:.2f} ms | {:.2f} ms | {:.2f}x | {}; {} |".format(
                    name, plan["moe"]["ep"], "" if ep else " (chosen)", len(plan["buckets"]),
                    experts, plan["predictions"]["iteration_us"] / 1e3, predicted / 1e3,
                    step["measured_iteration_us"] / 1e3, step["measured_best_iteration_us"] / 1e3,
                    step["measured_iteration_us"] / predicted,
                    "ok" if ok else "FAILED", step["moe_layers_in_step"]))


if __name__ == "__main__":
    main()
