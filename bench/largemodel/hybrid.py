#!/usr/bin/env python3
"""Hybrid plans measured against predicted on cpu-local (issue 14, item 5).

A 4-layer `zenopt-modelgen gpt` is planned on the cpu-local preset at tp 2 x pp 2 and at
tp 4 (np 4), once with zenopt's own decomposition and once per forced degree k in 1, 2, 4
(`--tp-chunks K`); every plan then runs under `mpirun -np 4 zenopt-run PLAN --json`
(libzenrt's hybrid executor: real CPU GEMMs, MPI collectives, numerics checked). Plans run
round-robin with a rotating start; each launch reports the mean iteration after one warm-up,
slowest rank; the table gives the median over rounds.

usage: hybrid.py BUILD_DIR [--rounds R] [--iters N]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

MODEL = ["--layers", "4", "--hidden", "256", "--heads", "8", "--vocab", "2048", "--seq", "128"]
BATCH = ["--global-batch", "8", "--micro-batch", "1"]
CONFIGS = [("tp 2 x pp 2", ["--tp", "2", "--pp", "2", "--dp", "1", "--schedule", "1f1b"]),
           ("tp 4", ["--tp", "4", "--pp", "1", "--dp", "1"])]
DEGREES = [1, 2, 4]


def chunks_text(d):
    return (f"{d['attention']['forward']}/{d['attention']['backward']}, "
            f"{d['mlp']['forward']}/{d['mlp']['backward']}")


def configuration_text(p):
    return (f"tp {p['tp']} pp {p['pp']} dp {p['dp']} ZeRO {p['zero']} SP "
            f"{'on' if p['sequence_parallel'] else 'off'} {p['schedule']}, "
            f"{p['micro_batches']} x {p['micro_batch']}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=4)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    work = tempfile.mkdtemp(prefix="zen-hybrid-")
    model = os.path.join(work, "gpt4.onnx")
    subprocess.run([os.path.join(bin_dir, "zenopt-modelgen"), "gpt", *MODEL, "-o", model], check=True)

    plans = []  # (config name, label, k or None, path, summary)
    for name, flags in CONFIGS:
        for k in [None] + DEGREES:
            label = "auto" if k is None else f"k = {k}"
            path = os.path.join(work, f"{name.replace(' ', '')}-{label.replace(' ', '')}.json")
            forced = [] if k is None else ["--tp-chunks", str(k)]
            result = subprocess.run([os.path.join(bin_dir, "zenopt"), model, "--cluster", "cpu-local", *flags,
                                     *BATCH, *forced, "--json", "-q", "-o", path],
                                    capture_output=True, text=True, check=True)
            plans.append((name, label, k, path, json.loads(result.stdout)))

    measured = {i: [] for i in range(len(plans))}
    failures = {}
    for r in range(args.rounds):
        order = list(range(len(plans)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            result = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4",
                                     os.path.join(bin_dir, "zenopt-run"), plans[i][3], "--iters", str(args.iters),
                                     "--json", "--timeout", "600"], capture_output=True, text=True)
            if result.returncode != 0:
                failures[i] = (result.stderr.strip().splitlines() or ["exit " + str(result.returncode)])[-1]
                continue
            out = json.loads(result.stdout)
            if out["numerics"] != "ok":
                failures[i] = "numerics " + out["numerics"]
            measured[i].append(out["measured_iteration_us"])

    print("| configuration | plan | chunks attention fwd/bwd, MLP fwd/bwd | predicted | measured (median) | "
          "min–max | measured / predicted | numerics |")
    print("|---|---|---|--:|--:|--:|--:|---|")
    for i, (name, label, k, path, summary) in enumerate(plans):
        p = summary["parallel"]
        predicted = summary["iteration_us"]
        m = measured[i]
        if not m:
            print(f"| {name}: {configuration_text(p)} | {label} | {chunks_text(p['decomposition'])} | "
                  f"{predicted / 1e3:.1f} ms | failed: {failures.get(i, '')} | | | |")
            continue
        median = statistics.median(m)
        print(f"| {name}: {configuration_text(p)} | {label} | {chunks_text(p['decomposition'])} | "
              f"{predicted / 1e3:.1f} ms | {median / 1e3:.1f} ms | {min(m) / 1e3:.1f}–{max(m) / 1e3:.1f} ms | "
              f"{median / predicted:.2f} | {'failed: ' + failures[i] if i in failures else 'ok'} |")

    print()
    for name, _ in CONFIGS:
        rows = [(i, plan) for i, plan in enumerate(plans) if plan[0] == name and plan[2] is not None and measured[i]]
        if len(rows) < len(DEGREES):
            print(f"- {name}: not every degree ran")
            continue
        predicted_best = min(rows, key=lambda row: row[1][4]["iteration_us"])
        measured_best = min(rows, key=lambda row: statistics.median(measured[row[0]]))
        best_time = statistics.median(measured[measured_best[0]])
        chosen_time = statistics.median(measured[predicted_best[0]])
        auto = [i for i, plan in enumerate(plans) if plan[0] == name and plan[2] is None][0]
        auto_text = (f"{statistics.median(measured[auto]) / 1e3:.1f} ms measured"
                     if measured[auto] else "did not run")
        configs = {configuration_text(plan[4]["parallel"]) for _, plan in rows}
        same = "the same configuration" if len(configs) == 1 else "configurations differ: " + "; ".join(configs)
        print(f"- {name} ({same}): predicted best {predicted_best[1][1]}, measured best {measured_best[1][1]}; "
              f"the predicted best measures {chosen_time / best_time:.3f}x the measured best. "
              f"zenopt's own choice ({chunks_text(plans[auto][4]['parallel']['decomposition'])}): {auto_text}.")


if __name__ == "__main__":
    main()
