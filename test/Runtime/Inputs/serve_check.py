#!/usr/bin/env python3
"""The zenopt-serve end-to-end check (test/Runtime/serve.test).

  serve_check.py plan --tp 2 [--pp 1] [--prefill-tp 2] -o plan.json   writes a serving plan
  serve_check.py run --mpirun MPIRUN --np 2 --plan plan.json --work DIR

`run` starts `MPIRUN -np N zenopt-serve PLAN --port 0` in the background, waits for
/health, sends concurrent completions with curl (prompts of different lengths), checks each
answer equals `zenopt-serve PLAN --reference` bit for bit, sends malformed requests (each
must get HTTP 400 with an error message while the server keeps answering), reads /metrics,
stops rank 0 with SIGTERM and checks that the job exits 0. Whatever happens, every process
it started is killed at the end (by process id) and the ones left are reported.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

# As zenopt --serve writes a Llama-style causal decoder's shape.
MODEL = {"family": "gpt", "layers": 2, "hidden": 64, "heads": 8, "kv_heads": 4, "ffn": 128,
         "vocab": 97, "mlp": "swiglu", "norm": "rmsnorm", "positions": "rotary",
         "tied_embeddings": False, "parameters": 0}


def write_plan(args):
    inference = {
        "model": dict(MODEL),
        "prefill": {"tp": args.prefill_tp or args.tp, "pp": args.pp},
        "decode": {"tp": args.tp, "pp": args.pp},
        "max_batch": 4, "max_sequence": 64, "kv_block_tokens": 16, "kv_cache_blocks": 32,
        "disaggregated": args.prefill_tp not in (0, args.tp),
        "ttft_us": 1000.0, "tpot_us": 100.0,  # informative: the engine ignores predictions
    }
    plan = {
        "format_version": 1, "generator": {"name": "serve_check.py", "version": "1"},
        "model": {"name": "llama-tiny", "hash": ""},
        "cluster": {"name": "cpu-local", "world_size": args.tp * args.pp},
        "strategy": "serve", "compressor": "none", "tensors": [], "buckets": [], "schedule": [],
        "predictions": {"iteration_us": 0, "compute_us": 0, "exposed_comm_us": 0,
                        "lower_bound_us": 0, "comm_bound_us": 0},
        "baselines": {}, "inference": inference,
    }
    with open(args.output, "w") as f:
        json.dump(plan, f, indent=1)


def curl(url, body=None, timeout=60):
    """(status, body) of one request, through curl."""
    command = ["curl", "-s", "-m", str(timeout), "-o", "-", "-w", "\n%{http_code}"]
    if body is not None:
        command += ["-H", "Content-Type: application/json", "--data-binary", body]
    out = subprocess.run(command + [url], capture_output=True, text=True).stdout
    text, _, code = out.rpartition("\n")
    return int(code or 0), text


def reference(plan, prompt, max_tokens):
    out = subprocess.run(["zenopt-serve", plan, "--reference", "--prompt",
                          ",".join(map(str, prompt)), "--max-tokens", str(max_tokens)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["tokens"]


def descendants(root):
    """Process ids under `root` (from /proc), deepest last."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def identity(pid):
    """(pid, start time) of a live process, or None: a pid the system reused is not ours."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else (pid, fields[19])


def alive(process):
    return identity(process[0]) == process


def remember(started, root):
    for pid in descendants(root):
        process = identity(pid)
        if process:
            started.add(process)


def plan_blocks(path):
    with open(path) as f:
        return json.load(f)["inference"]["kv_cache_blocks"]


def run(args):
    os.makedirs(args.work, exist_ok=True)
    log_path = os.path.join(args.work, "server.log")
    log = open(log_path, "w")
    job = subprocess.Popen([args.mpirun, "-np", str(args.np), "zenopt-serve", args.plan,
                            "--port", "0", "--timeout", "60"],
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = set()
    failures = []

    def check(ok, message):
        print(("" if ok else "FAIL: ") + message, flush=True)
        if not ok:
            failures.append(message)

    try:
        # The ready line names the port and rank 0's process id.
        deadline, port, rank0 = time.time() + 40, None, None
        while time.time() < deadline and port is None:
            remember(started, job.pid)
            with open(log_path) as f:
                match = re.search(r"on http://127\.0\.0\.1:(\d+) \(tp (\d+) x pp (\d+), pid (\d+)\)", f.read())
            if match:
                port, rank0 = int(match.group(1)), int(match.group(4))
            elif job.poll() is not None:
                break
            else:
                time.sleep(0.1)
        if port is None:
            raise RuntimeError("the server did not start:\n" + open(log_path).read())
        base = f"http://127.0.0.1:{port}"
        status, _ = 0, ""
        while time.time() < deadline:
            status, _ = curl(base + "/health")
            if status == 200:
                break
            time.sleep(0.1)
        check(status == 200, f"health: {status}")
        remember(started, job.pid)

        # Concurrent completions of different lengths, each against the reference.
        cases = []
        for k in range(8):
            length = 1 + (k * 9) % 23
            prompt = [(k * 37 + i * 11 + 3) % 97 for i in range(length)]
            cases.append((prompt, 1 + (k * 7) % 20))
        cases.append(([96] * 44, 20))  # exactly max_sequence
        clients = [subprocess.Popen(
            ["curl", "-s", "-m", "60", "-o", "-", "-w", "\n%{http_code}", "-H",
             "Content-Type: application/json", "--data-binary",
             json.dumps({"prompt": prompt, "max_tokens": n}), base + "/v1/completions"],
            stdout=subprocess.PIPE, text=True) for prompt, n in cases]
        equal = 0
        for (prompt, n), client in zip(cases, clients):
            text, _, code = client.communicate()[0].rpartition("\n")
            expected = reference(args.plan, prompt, n)
            if code == "200" and json.loads(text) == {"tokens": expected}:
                equal += 1
            else:
                check(False, f"prompt {prompt} max_tokens {n}: HTTP {code} {text}, "
                             f"expected {expected}")
        check(equal == len(cases), f"concurrent: {equal} of {len(cases)} answers equal the "
                                   "unsharded reference")

        # Malformed requests: 400 with a message, and the server keeps serving.
        bad = [("not json", "{\"prompt\": [1, 2"),
               ("not an object", "[1, 2, 3]"),
               ("no prompt", "{\"max_tokens\": 4}"),
               ("prompt not a list", "{\"prompt\": \"hello\", \"max_tokens\": 4}"),
               ("batch of prompts", "{\"prompt\": [[1, 2], [3]], \"max_tokens\": 4}"),
               ("id out of vocabulary", "{\"prompt\": [1, 97], \"max_tokens\": 4}"),
               ("negative id", "{\"prompt\": [-1], \"max_tokens\": 4}"),
               ("empty prompt", "{\"prompt\": [], \"max_tokens\": 4}"),
               ("no max_tokens", "{\"prompt\": [1]}"),
               ("max_tokens 0", "{\"prompt\": [1], \"max_tokens\": 0}"),
               ("max_tokens not an integer", "{\"prompt\": [1], \"max_tokens\": 2.5}"),
               ("max_tokens huge", "{\"prompt\": [1], \"max_tokens\": 9223372036854775807}"),
               ("too long", json.dumps({"prompt": [1] * 60, "max_tokens": 5}))]
        for name, body in bad:
            status, text = curl(base + "/v1/completions", body)
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = None
            check(status == 400 and bool(message), f"bad request ({name}): {status} {message}")
        status, text = curl(base + "/v1/completions", json.dumps({"prompt": [5, 6], "max_tokens": 6}))
        check(status == 200 and json.loads(text)["tokens"] == reference(args.plan, [5, 6], 6),
              f"after the bad requests: {status}, equal to the reference")
        status, _ = curl(base + "/nowhere")
        check(status == 404, f"unknown path: {status}")

        status, text = curl(base + "/metrics")
        metrics = dict(line.rsplit(" ", 1) for line in text.splitlines()
                       if line and not line.startswith("#"))
        check(status == 200, f"metrics: {status}")
        for name, want in [("zenopt_serve_requests_total", len(cases) + 1),
                           ("zenopt_serve_bad_requests_total", len(bad)),
                           ("zenopt_serve_generated_tokens_total", sum(n for _, n in cases) + 6),
                           ("zenopt_serve_ttft_seconds_count", len(cases) + 1),
                           # every block of the plan's cache free again
                           ("zenopt_serve_kv_free_blocks", plan_blocks(args.plan))]:
            check(metrics.get(name) == str(want), f"metrics: {name} {metrics.get(name)}")

        # SIGTERM on rank 0: every rank stops, the job exits 0.
        os.kill(rank0, signal.SIGTERM)
        try:
            code = job.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        check(code == 0, f"stopped: exit {code}")
    except Exception as error:  # reported, then cleaned up below
        failures.append(str(error))
        print("FAIL: " + str(error), flush=True)
    finally:
        remember(started, job.pid)
        if job.poll() is None and identity(job.pid):
            started.add(identity(job.pid))
        for process in sorted(started, reverse=True):
            if alive(process):
                try:
                    os.kill(process[0], signal.SIGKILL)
                except OSError:
                    pass
        try:
            job.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.2)
        left = [process[0] for process in started if alive(process)]
        print(f"left behind: {len(left)}", flush=True)
        if left:
            failures.append(f"processes left behind: {left}")
        log.close()
    if failures:
        print("server log:\n" + open(log_path).read(), file=sys.stderr)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan")
    plan.add_argument("--tp", type=int, required=True)
    plan.add_argument("--pp", type=int, default=1)
    plan.add_argument("--prefill-tp", type=int, default=0)
    plan.add_argument("-o", "--output", required=True)
    check = sub.add_parser("run")
    check.add_argument("--mpirun", required=True)
    check.add_argument("--np", type=int, required=True)
    check.add_argument("--plan", required=True)
    check.add_argument("--work", required=True)
    args = parser.parse_args()
    if args.command == "plan":
        write_plan(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
