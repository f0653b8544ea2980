#!/usr/bin/env python3
"""Pipelining degree of one MoE layer on cpu-local, measured against predicted.

Runs `zenrt-moe-check` under `mpirun -np 4` (test/mpirun.sh) for a few layer shapes:
it checks the pipelined layer's numerics, times libzenrt's forward (real MPI
all-to-alls, the experts' MLPs computed on the CPU) for r in 1, 2, 4, 8 with the
flat all-to-all, and prints the cost model's forward time of the same layer on
the cpu-local preset. Prints a markdown table per shape: measured and predicted
time per r, the best r of each, and how far the measured time at the predicted
best r is from the measured best (issue 15 asks for at most 10%).

usage: degree.py BUILD_DIR [REPEATS]
"""
import os
import re
import subprocess
import sys

# experts, hidden, ffn, capacity (rows per expert and source rank)
SHAPES = [(8, 256, 256, 32), (8, 1024, 32, 32), (16, 512, 64, 64)]
DEGREES = [1, 2, 4, 8]


def main():
    build = sys.argv[1]
    repeats = sys.argv[2] if len(sys.argv) > 2 else "7"
    mpirun = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "mpirun.sh")
    print("| experts, hidden, ffn, capacity | r | measured | predicted | measured best r | "
          "predicted best r | measured at predicted r vs best |")
    print("|---|---|---|---|---|---|---|")
    for experts, hidden, ffn, capacity in SHAPES:
        result = subprocess.run(
            [mpirun, "-np", "4", os.path.join(build, "bin", "zenrt-moe-check"), "--experts", str(experts),
             "--hidden", str(hidden), "--ffn", str(ffn), "--capacity", str(capacity), "--chunks",
             ",".join(map(str, DEGREES)), "--algorithms", "flat", "--time", repeats, "--predict-on",
             "cpu-local", "--timeout", "600"],
            capture_output=True, text=True, check=True)
        measured = {int(r): float(us) for r, us in
                    re.findall(r"time flat r=(\d+): measured ([0-9.]+) us", result.stdout)}
        predicted = {int(r): float(us) for r, us in
                     re.findall(r"predicted flat r=(\d+) on cpu-local: ([0-9.]+) us", result.stdout)}
        best_measured = min(measured, key=measured.get)
        best_predicted = min(predicted, key=predicted.get)
        gap = measured[best_predicted] / measured[best_measured] - 1
        shape = f"{experts}, {hidden}, {ffn}, {capacity}"
        for r in DEGREES:
            tail = (f"{best_measured} | {best_predicted} | +{100 * gap:.1f}%" if r == DEGREES[0]
                    else " | | ")
            print(f"| {shape if r == DEGREES[0] else ''} | {r} | {measured[r] / 1e3:.2f} ms | "
                  f"{predicted[r] / 1e3:.2f} ms | {tail} |")


if __name__ == "__main__":
    main()
