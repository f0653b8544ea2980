"""bench/RESULTS.md section 13, table 1: every sparse scheme measured on this machine next to the
cost model's prediction for the same gradient on the cpu-local preset (issue 39, bench item 7).

    python3 bench/runtime/sparse_table.py [BUILD] [--reps 15] [--runs 3] [--ranks 2,4]

For each rank count: bench/runtime/sparse_schemes.py under mpirun (test/mpirun.sh:
--allow-run-as-root --oversubscribe) measures every scheme at every density and writes each
density's rows per rank; `zenopt sparsity --batch 1 --ranks N` measures the statistics of
exactly those rows (density, gamma, skew: one line per rank) and `zenopt sparse-cost --cluster
cpu-local --ranks N --statistics` prices every scheme from them. No constant is fitted: the
prediction is the preset's. Prints a Markdown table with both times per scheme, the measured and
predicted winners and Spearman's rho between the two rankings (over the schemes both have).
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMES = ["dense", "agsparse", "sparcml", "omnireduce", "balanced", "hierarchical"]
DENSITIES = "0.001,0.01,0.03,0.1,0.3"
WIDTH = 64


def ranks_of(times):
    """Rank positions (1 = fastest), ties sharing their mean position."""
    order = sorted(times, key=times.get)
    position = {}
    at = 0
    while at < len(order):
        end = at
        while end + 1 < len(order) and times[order[end + 1]] == times[order[at]]:
            end += 1
        for name in order[at:end + 1]:
            position[name] = (at + end) / 2 + 1
        at = end + 1
    return position


def spearman(measured, predicted):
    names = sorted(set(measured) & set(predicted))
    a, b = ranks_of({n: measured[n] for n in names}), ranks_of({n: predicted[n] for n in names})
    mean = (len(names) + 1) / 2
    cov = sum((a[n] - mean) * (b[n] - mean) for n in names)
    spread = (sum((a[n] - mean) ** 2 for n in names) * sum((b[n] - mean) ** 2 for n in names))
    return cov / spread ** 0.5 if spread else float("nan")


# The sparcml threshold a plan would carry: row bytes / (row + index bytes), 4-byte indices for
# tables under 2^31 rows (docs/sparse-gradients.md; costmodel/lib/Sparse.cpp indexBytes).
SPARCML_THRESHOLD = WIDTH * 4 / (WIDTH * 4 + 4)


def measure(build, ranks, reps, densities, workdir, run):
    out = os.path.join(workdir, f"np{ranks}-run{run}.json")
    subprocess.run([os.path.join(ROOT, "test", "mpirun.sh"), "-np", str(ranks), "env",
                    f"PYTHONPATH={os.path.join(build, 'python')}", "/usr/bin/python3",
                    os.path.join(ROOT, "bench", "runtime", "sparse_schemes.py"),
                    "--reps", str(reps), "--densities", densities, "--json", out,
                    "--width", str(WIDTH), "--sparcml-threshold", str(SPARCML_THRESHOLD),
                    "--indices-dir", workdir], check=True, stdout=sys.stderr)
    with open(out) as file:
        return json.load(file)


def predict(zenopt, measured, entry, workdir):
    size, rows = measured["ranks"], measured["rows"]
    indices = os.path.join(workdir, f"np{size}-d{entry['density']}.txt")
    stats = indices[:-4] + ".stats.json"
    subprocess.run([zenopt, "sparsity", "--indices", indices, "--rows", str(rows), "--batch", "1",
                    "--ranks", str(size), "-o", stats], check=True)
    with open(stats) as file:
        skew = json.load(file)["statistics"]["skew"]
    priced = json.loads(subprocess.run(
        [zenopt, "sparse-cost", "--cluster", "cpu-local", "--ranks", str(size), "--rows",
         str(rows), "--row-elements", str(measured["width"]), "--statistics", stats, "--json"],
        check=True, capture_output=True, text=True).stdout)
    return skew, {s["scheme"]: s["time_us"] for s in priced["schemes"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--densities", default=DENSITIES)
    args = parser.parse_args()
    zenopt = os.path.join(args.build, "bin", "zenopt")
    print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print("| np | density | rows/rank | gamma | skew | " + " | ".join(SCHEMES) +
          " | winner measured (runs won) / predicted | rho |")
    print("|---|---|---|---|---|" + "---|" * len(SCHEMES) + "---|---|")
    with tempfile.TemporaryDirectory() as workdir:
        for size in [int(n) for n in args.ranks.split(",")]:
            runs = [measure(args.build, size, args.reps, args.densities, workdir, run)
                    for run in range(args.runs)]
            measured = runs[0]
            for at, entry in enumerate(measured["densities"]):
                per_run = [run["densities"][at]["time_us"] for run in runs]
                took = {s: statistics.median(float(times[s]) for times in per_run)
                        for s in SCHEMES}
                wins = collections.Counter(min(times, key=times.get) for times in per_run)
                skew, predicted = predict(zenopt, measured, entry, workdir)
                cells = []
                for scheme in SCHEMES:
                    guess = (f"{predicted[scheme] / 1000:.2f}" if scheme in predicted
                             else "n/a")
                    cells.append(f"{took[scheme] / 1000:.2f} / {guess}")
                measured_best = min(took, key=took.get)
                measured_best += f" ({wins[measured_best]}/{len(runs)})"
                predicted_best = min(predicted, key=predicted.get)
                print(f"| {size} | {entry['density'] * 100:g}% | {entry['rows_per_rank']} | "
                      f"{entry['gamma']:.2f} | {skew:.2f} | " + " | ".join(cells) +
                      f" | {measured_best} / {predicted_best} | "
                      f"{spearman(took, predicted):.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
