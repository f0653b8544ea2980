"""Measures every sparse synchronisation scheme (zen/SparseScheme.h) on this machine, on
row-sparse gradients built from a real token stream (issue 39, bench item "measured").

    mpirun --allow-run-as-root --oversubscribe -np N env PYTHONPATH=build/python \
        /usr/bin/python3 bench/runtime/sparse_schemes.py [--width 64] [--reps 15] \
        [--densities 0.001,0.01] [--json FILE] [--indices-dir DIR]

The text: every license text and copyright file Debian installs (/usr/share/common-licenses,
/usr/share/doc/*/copyright), split into lowercase words; a word's row is its frequency rank,
so the table's rows are skewed as an embedding's are (Zipf). Rank r reads its own stretch of
the stream, as many tokens as it takes to touch density x rows distinct rows, and sends those
rows (its gradient after backward's local sum). Each scheme runs
through zenrt_sparse_allreduce (host memory, MPI): median of --reps calls after 2 warm-ups,
the slowest rank's. Prints per density the measured gamma (rows touched by any rank over one
rank's) and each scheme's time and speedup over dense. --json writes the same numbers;
--indices-dir writes, per density, every rank's rows as one line (rank order), the index stream
`zenopt sparsity --batch 1 --ranks N` reads to measure the statistics the cost model prices
(bench/runtime/sparse_table.py puts the two side by side).
"""
import argparse
import collections
import glob
import json
import os
import re
import statistics
import time

import torch

from zenopt import runtime, world

SCHEMES = ["dense", "agsparse", "sparcml", "omnireduce", "balanced", "hierarchical"]
DENSITIES = [0.001, 0.01, 0.03, 0.1, 0.3]


def token_stream():
    paths = sorted(glob.glob("/usr/share/common-licenses/*") +
                   glob.glob("/usr/share/doc/*/copyright"))
    words = []
    for path in paths:
        try:
            with open(path, errors="replace") as file:
                words += re.findall(r"[a-z]+", file.read().lower())
        except OSError:
            continue
    ranked = [w for w, _ in collections.Counter(words).most_common()]
    row = {w: i for i, w in enumerate(ranked)}
    return [row[w] for w in words], len(ranked)


def touched_rows(stream, rows, density, rank, size):
    """The distinct rows rank `rank`'s tokens touch, read from its own stretch of the stream
    until density x rows of them: the rows of its embedding gradient (backward has summed the
    lookups of a row already, so the timing is the synchronisation's)."""
    want = max(1, int(density * rows))
    start = rank * len(stream) // size
    seen, taken = set(), []
    at = start
    while len(seen) < want and at < start + len(stream):
        token = stream[at % len(stream)]
        taken.append(token)
        seen.add(token)
        at += 1
    return torch.tensor(sorted(seen), dtype=torch.int64)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--densities", default=",".join(map(str, DENSITIES)))
    parser.add_argument("--sparcml-threshold", type=float,
                        help="sparcml's dense_threshold (default: the C API's)")
    parser.add_argument("--json", help="write the results here (rank 0)")
    parser.add_argument("--indices-dir", help="write each density's rows per rank here (rank 0)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank, size = world.init()
    stream, rows = token_stream()
    if rank == 0:
        print(f"{size} ranks; table {rows} rows x {args.width} fp32 "
              f"({rows * args.width * 4 / 1e6:.1f} MB dense), {len(stream)} tokens")
        print(f"{'density':>8} {'gamma':>6} " + " ".join(f"{s:>13}" for s in SCHEMES))
    generator = torch.Generator().manual_seed(rank)
    spelling = ({"sparcml": f"sparcml:{args.sparcml_threshold}"}
                if args.sparcml_threshold is not None else {})
    results = []
    for density in [float(d) for d in args.densities.split(",")]:
        tokens = touched_rows(stream, rows, density, rank, size)
        if rank == 0 and args.indices_dir:
            with open(os.path.join(args.indices_dir, f"np{size}-d{density}.txt"), "w") as file:
                for other in range(size):
                    file.write(" ".join(map(str, touched_rows(stream, rows, density, other,
                                                              size).tolist())) + "\n")
        values = torch.randn(tokens.numel(), args.width, generator=generator)
        out = torch.empty(rows, args.width)
        times = {}
        touched = 0
        for scheme in SCHEMES:
            samples = []
            for rep in range(args.reps + 2):
                start = time.perf_counter()
                touched = runtime.sparse_allreduce(spelling.get(scheme, scheme), rows,
                                                   args.width, tokens.numel(),
                                                   tokens.data_ptr(), values.data_ptr(),
                                                   out.data_ptr())
                if rep >= 2:
                    samples.append(time.perf_counter() - start)
            own = int(statistics.median(samples) * 1e6)
            times[scheme] = max(runtime.world_exchange(own, size))
        gamma = touched / max(1, tokens.numel())
        results.append({"density": density, "rows_per_rank": tokens.numel(),
                        "merged_rows": touched, "gamma": gamma, "time_us": times})
        if rank == 0:
            print(f"{density:>8.3f} {gamma:>6.2f} " + " ".join(
                f"{times[s]:>7d}us {times['dense'] / max(times[s], 1):>4.1f}x" for s in SCHEMES),
                flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as file:
            json.dump({"ranks": size, "rows": rows, "width": args.width, "tokens": len(stream),
                       "reps": args.reps, "densities": results}, file, indent=1)


if __name__ == "__main__":
    main()
