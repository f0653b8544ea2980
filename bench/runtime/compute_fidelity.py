#!/usr/bin/env python3
"""Measured against predicted with measured compute: bench's runtime section (zenbench.py,
section 3) run once with `zenopt-run --compute sleep` (compute tasks sleep their predicted
durations: only communication is measured) and once with `--compute gemm` (each compute task
runs a GEMM of its FLOPs and a memory pass of its bytes on the CPU), and how well each agrees
with the predictions.

  bench/runtime/compute_fidelity.py --build BUILD [--quick] [--modes sleep,gemm] [--json OUT]

BUILD/bin needs zenopt, zenopt-modelgen and zenopt-run; mpirun must be on PATH. Prints, per
rank count and mode: median |measured - predicted| iteration time (µs and % of predicted),
Spearman ρ and Kendall τ between the strategies' predicted and measured iteration times, and
measured against predicted compute per iteration. The cost model's cpu-local preset was
fitted on the development machine: on that machine these numbers are not out of sample.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "report"))
import zenbench  # noqa: E402
from zenbench import median, spearman  # noqa: E402


def kendall_tau(a, b):
    """Kendall's τ-a: (concordant - discordant pairs) / pairs."""
    pairs = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a))]
    sign = [(a[i] - a[j]) * (b[i] - b[j]) for i, j in pairs]
    return (sum(s > 0 for s in sign) - sum(s < 0 for s in sign)) / len(pairs)


def fidelity(result):
    """Agreement of one rank count's launches with their predictions."""
    plans = result["plans"]
    ran = [s for s in zenbench.RUNTIME_STRATEGIES if "error" not in plans[s] and plans[s]["measured"]]
    predicted = [plans[s]["predicted"] for s in ran]
    measured = [median(plans[s]["measured"]) for s in ran]
    errors = [abs(m - p) for m, p in zip(measured, predicted)]
    compute_ratio = [median(plans[s]["measured_compute"]) / plans[s]["predicted_compute"]
                     for s in ran]
    return {
        "strategies": ran,
        "failed": {s: plans[s]["error"] for s in zenbench.RUNTIME_STRATEGIES if "error" in plans[s]},
        "numerics_ok": all(n == "ok" for s in ran for n in plans[s]["numerics"]),
        "predicted_us": predicted,
        "measured_us": measured,
        "median_abs_error_us": median(errors),
        "median_abs_error_pct": median([e / p * 100 for e, p in zip(errors, predicted)]),
        "spearman": spearman(predicted, measured) if len(ran) > 1 else None,
        "kendall_tau": kendall_tau(predicted, measured) if len(ran) > 1 else None,
        "fastest_predicted": ran[predicted.index(min(predicted))],
        "fastest_measured": ran[measured.index(min(measured))],
        "median_measured_over_predicted_compute": median(compute_ratio),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    parser.add_argument("--build", required=True, help="build directory with bin/")
    parser.add_argument("--quick", action="store_true", help="fewer launches (noisy)")
    parser.add_argument("--modes", default="sleep,gemm", help="zenopt-run --compute values")
    parser.add_argument("--json", help="write the raw measurements here")
    args = parser.parse_args()
    ctx = zenbench.Context(argparse.Namespace(root=args.root, build=args.build, out=args.build,
                                              quick=args.quick, jobs=1))
    model = os.path.join(ctx.work, "models", "runtime_mlp.onnx")
    os.makedirs(os.path.dirname(model), exist_ok=True)
    zenbench.run([ctx.tool("zenopt-modelgen")] + zenbench.RUNTIME_MODEL
                 + ["-o", model, "--name", "runtime_mlp"])
    raw, load = {}, {}
    for mode in args.modes.split(","):
        load[mode] = os.getloadavg()[0]
        ctx.log(f"runtime section with --compute {mode} (load average {load[mode]:.2f})")
        raw[mode] = zenbench.runtime_bench(ctx, {"runtime_mlp": model}, compute=mode)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_average": load, "raw": raw}, f, indent=1)

    print(f"model `zenopt-modelgen {' '.join(zenbench.RUNTIME_MODEL)}`, cluster cpu-local, "
          f"{ctx.profile.runtime_rounds} launches x {ctx.profile.runtime_iters} iterations per "
          f"plan and mode\n")
    rows = []
    for mode, results in raw.items():
        for ranks, result in results.items():
            f = fidelity(result)
            rows.append([mode, ranks, len(f["strategies"]), f"{load[mode]:.1f}",
                         zenbench.fmt_time_us(f["median_abs_error_us"]),
                         f"{f['median_abs_error_pct']:.0f}%",
                         f"{f['spearman']:.2f}", f"{f['kendall_tau']:.2f}",
                         f"{f['fastest_predicted']} / {f['fastest_measured']}",
                         f"{f['median_measured_over_predicted_compute']:.2f}",
                         "ok" if f["numerics_ok"] else "FAILED"])
    print(zenbench.table(["--compute", "ranks", "strategies", "load", "median |m - p|",
                          "of predicted", "Spearman ρ", "Kendall τ",
                          "fastest predicted / measured", "compute measured / predicted",
                          "numerics"], rows))
    for mode, results in raw.items():
        for ranks, result in results.items():
            f = fidelity(result)
            print(f"\n--compute {mode}, -np {ranks}, predicted → measured: " + ", ".join(
                f"{s} {zenbench.fmt_time_us(p)} → {zenbench.fmt_time_us(m)}"
                for s, p, m in zip(f["strategies"], f["predicted_us"], f["measured_us"]))
                + "".join(f"; {s} failed: {e}" for s, e in f["failed"].items()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (zenbench.BenchError, OSError) as error:
        print(f"compute_fidelity: error: {error}", file=sys.stderr)
        sys.exit(1)
