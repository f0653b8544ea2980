"""Serving on this machine: measured TTFT and TPOT against zenopt --serve's prediction (issue 41).

  python3 bench/serving/measure.py BUILD_DIR [--requests N] [--ranks 1,2,4]

For each rank count N, `zenopt --serve --cluster cpu-local --tp N --max-batch 1` plans a small
Llama-style decoder (fp32, the engine's precision) and predicts one prompt's prefill (TTFT) and
one decode step (TPOT at batch 1); `mpirun -np N zenopt-serve` serves the plan and the script
sends one warm-up request, then N requests one after another, and reads the engine's own TTFT
and TPOT histograms from /metrics (the mean over the timed requests). Prints a Markdown table
and whether the predicted ranking of the rank counts matches the measured one.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MODEL = ["llama", "--layers", "4", "--hidden", "512", "--heads", "8", "--kv-heads", "4",
         "--ffn", "1408", "--vocab", "2048", "--seq", "256"]
PROMPT, OUTPUT = 128, 32


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode()


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as r:
        return json.loads(r.read())


def histogram(metrics, name):
    """(sum, count) of a Prometheus histogram."""
    total = float(re.search(rf"^{name}_sum (\S+)$", metrics, re.M).group(1))
    count = float(re.search(rf"^{name}_count (\S+)$", metrics, re.M).group(1))
    return total, count


def measure(build, plan, ranks, requests):
    port = free_port()
    command = ["mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    command += [os.path.join(build, "bin", "zenopt-serve"), plan, "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if json.loads(get(base + "/health"))["status"] == "ready":
                    break
            except Exception:
                pass
            time.sleep(0.1)
        else:
            sys.exit("zenopt-serve did not become ready")
        prompt = [(7 * i + 3) % 2048 for i in range(PROMPT)]
        post(base + "/v1/completions", {"prompt": prompt, "max_tokens": OUTPUT})  # warm-up
        before = get(base + "/metrics")
        for r in range(requests):
            prompt = [(11 * i + r) % 2048 for i in range(PROMPT)]
            post(base + "/v1/completions", {"prompt": prompt, "max_tokens": OUTPUT})
        after = get(base + "/metrics")
        means = []
        for name in ("zenopt_serve_ttft_seconds", "zenopt_serve_tpot_seconds"):
            (s0, c0), (s1, c1) = histogram(before, name), histogram(after, name)
            means.append((s1 - s0) / (c1 - c0) * 1e6)
        return means
    finally:
        # rank 0's pid is in the ready line; mpirun forwards SIGTERM too.
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    args = argparse.ArgumentParser()
    args.add_argument("build")
    args.add_argument("--requests", type=int, default=8)
    args.add_argument("--ranks", default="1,2,4")
    a = args.parse_args()
    bin_dir = os.path.join(a.build, "bin")
    work = tempfile.mkdtemp(prefix="zen-serve-bench-")
    model = os.path.join(work, "llama.onnx")
    subprocess.run([os.path.join(bin_dir, "zenopt-modelgen")] + MODEL + ["-o", model], check=True)
    rows = []
    for ranks in [int(r) for r in a.ranks.split(",")]:
        plan = os.path.join(work, f"plan{ranks}.json")
        summary = json.loads(subprocess.run(
            [os.path.join(bin_dir, "zenopt"), model, "--serve", "--cluster", "cpu-local", "--precision", "fp32",
             "--tp", str(ranks), "--pp", "1", "--prompt-tokens", str(PROMPT), "--output-tokens", str(OUTPUT),
             "--max-batch", "1", "-q", "--json", "-o", plan], check=True, capture_output=True, text=True).stdout)
        i = summary["inference"]
        ttft, tpot = measure(a.build, plan, ranks, a.requests)
        rows.append((ranks, i["prefill_us"], ttft, i["decode_step_us"], tpot))
    print(f"llama {' '.join(MODEL[1:])}, prompt {PROMPT}, output {OUTPUT}, fp32, one request at a time, "
          f"{a.requests} timed requests")
    print()
    print("| ranks (tp) | predicted TTFT (ms) | measured TTFT (ms) | error | predicted TPOT (ms) | measured TPOT (ms) | error |")
    print("|---|---|---|---|---|---|---|")
    for ranks, pttft, mttft, ptpot, mtpot in rows:
        print(f"| {ranks} | {pttft / 1e3:.2f} | {mttft / 1e3:.2f} | {(pttft / mttft - 1) * 100:+.1f}% | "
              f"{ptpot / 1e3:.3f} | {mtpot / 1e3:.3f} | {(ptpot / mtpot - 1) * 100:+.1f}% |")
    for column, name in ((1, "TTFT"), (3, "TPOT")):
        predicted = [r[0] for r in sorted(rows, key=lambda r: r[column])]
        measured = [r[0] for r in sorted(rows, key=lambda r: r[column + 1])]
        print(f"\n{name} ranking, fastest first: predicted {predicted}, measured {measured}: "
              f"{'matches' if predicted == measured else 'differs'}")


if __name__ == "__main__":
    main()
