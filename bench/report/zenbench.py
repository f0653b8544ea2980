#!/usr/bin/env python3
"""zenopt benchmark suite: runs every measurement and writes bench/RESULTS.md and bench/plots/.

Called by bench/run after the build. Sections:
  1. plan quality   every model x every preset cluster: baselines, auto, auto with compression,
                    lower bound (predictions are deterministic, so one run each; checked below)
  2. planner speed  in-process phase times (zen-phase-bench, Google Benchmark), end-to-end CLI
                    wall time, growth of planning time with tensor count (log-log fit)
  3. runtime        zenopt-run under mpirun -np 2 and -np 4 on cpu-local, every strategy:
                    measured against predicted, and whether the predicted ranking holds
  4. noise          repetitions, medians, spreads, load average, determinism
Standard library only.
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svgplot  # noqa: E402

BASELINES = ["nooverlap", "wfbp", "ddp", "horovod", "mgwfbp"]
COMPRESSORS = "fp16,int8,topk:0.01,powersgd:4"
SHARED_MODELS = ["resnet50", "vgg16", "bert_base_encoder", "gpt2_small"]
GENERATED_MODELS = {
    "gpt3_175b": ["gpt", "--layers", "96", "--hidden", "12288", "--heads", "96", "--seq", "2048"],
    "bert_large": ["bert", "--layers", "24", "--hidden", "1024", "--heads", "16", "--seq", "512",
                   "--vocab", "30522"],
}
GROWTH_TENSORS = [100, 300, 1000, 3000, 10000, 100000]
# Runtime model: compute and gradient traffic of the same order on cpu-local (~25 ms each), so
# the strategies' overlap decisions matter, with few enough elements (1.8 M) that zenopt-run's
# per-iteration numerics check keeps a launch to a few seconds.
RUNTIME_MODEL = ["mlp", "--tensors", "24", "--hidden", "384", "--batch", "32"]
RUNTIME_STRATEGIES = ["auto", "auto+comp"] + BASELINES
RUNTIME_RANKS = [2, 4]
COMM_ONLY = "nooverlap, communication only"  # calibration launch: the nooverlap plan, no compute
PLANNER_CLUSTER = "a100x64"  # the default cluster: what `zenopt MODEL.onnx` plans for
PHASES = ["Import", "BuildIR", "Plan", "Codegen"]  # zen-phase-bench's benchmark families
WRITE_PHASE = "WritePlan"  # the plan JSON text: zenopt writes it with -o only, not end to end
# Plan quality is the data-parallel gradient planner's against the data-parallel baselines: GPT-3
# 175B fits no preset's GPUs replicated (zenopt plans tp/pp/ZeRO for it, section 6), so it is
# timed (SPEED_MODELS) but not compared here.
QUALITY_MODELS = SHARED_MODELS + [m for m in GENERATED_MODELS if m != "gpt3_175b"]
SPEED_MODELS = SHARED_MODELS + list(GENERATED_MODELS)
GROWTH_MODELS = [f"mlp_{n}" for n in GROWTH_TENSORS]
# Growth models also timed end to end (phase table, targets, before/after).
LARGE_GROWTH_MODELS = ["mlp_10000", "mlp_100000"]
# End-to-end planning targets (seconds, median wall) and the growth exponent limit in every
# regime, from the planner-speed issue.
TARGETS = {"gpt2_small": 0.05, "gpt3_175b": 0.1, "mlp_10000": 0.3, "mlp_100000": 3.0}
GROWTH_EXPONENT_TARGET = 1.1
# Before/after comparison (--compare-build): the models timed end to end with both builds.
COMPARE_MODELS = ["gpt2_small", "gpt3_175b", "mlp_10000", "mlp_100000"]
# The speed targets time the data-parallel gradient planner alone: GPT-3's shapes end to end on a
# cluster whose GPUs hold the replicated model, where zenopt plans data parallelism instead of
# searching tp/pp/ZeRO (that search is timed in section 6).
ROOMY_CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                             "a100x64-roomy.json")
E2E_ARGS = {"gpt3_175b": ["--cluster", ROOMY_CLUSTER]}


class Profile:
    """Repetition counts. --quick trades noise for a fast check of the whole pipeline."""

    def __init__(self, quick):
        self.quick = quick
        self.phase_reps = 2 if quick else 5
        self.growth_reps = 1 if quick else 5
        self.cli_reps = 2 if quick else 5
        self.runtime_rounds = 1 if quick else 3
        self.runtime_iters = 4 if quick else 8
        self.min_time_s = 0.05 if quick else 0.2


class BenchError(RuntimeError):
    pass


# ----------------------------------------------------------------------------- statistics

def median(values):
    return statistics.median(values)


def spread(values):
    """(min, max, relative spread (max-min)/median)."""
    mid = median(values)
    return min(values), max(values), (max(values) - min(values)) / mid if mid else 0.0


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def loglog_fit(xs, ys):
    """Least-squares fit of log y = k log x + c; returns (k, c)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    k = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return k, my - k * mx


def regime_fits(xs, ys):
    """Growth exponents per regime: the two-segment log-log fit (segments share the break point,
    each has at least two points) with the least squared residual, or one fit for fewer than four
    points or when one line fits as well. Returns [(x_from, x_to, k)]."""
    def fit_residual(lo, hi):
        k, c = loglog_fit(xs[lo:hi + 1], ys[lo:hi + 1])
        return k, sum((math.log(y) - (k * math.log(x) + c)) ** 2
                      for x, y in zip(xs[lo:hi + 1], ys[lo:hi + 1]))

    last = len(xs) - 1
    k, best = fit_residual(0, last)
    regimes = [(xs[0], xs[last], k)]
    if len(xs) < 4:
        return regimes
    for b in range(1, last):
        (k1, r1), (k2, r2) = fit_residual(0, b), fit_residual(b, last)
        # A break must explain clearly more than one line does.
        if r1 + r2 < 0.5 * best:
            best = r1 + r2
            regimes = [(xs[0], xs[b], k1), (xs[b], xs[last], k2)]
    return regimes


def fmt_regimes(regimes):
    return "; ".join(f"{a}–{b} tensors: **{k:.2f}**" for a, b, k in regimes)


def ranks(values):
    """Ranks starting at 1, ties get their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else float("nan")


# ----------------------------------------------------------------------------- formatting

def fmt_time_us(us):
    if us < 0:
        return "−" + fmt_time_us(-us)
    if us >= 1e6:
        return f"{us / 1e6:.3g} s" if us < 1e8 else f"{us / 1e6:,.0f} s"
    if us >= 1e3:
        return f"{us / 1e3:.4g} ms"
    return f"{us:.3g} µs"


def fmt_s(seconds):
    return fmt_time_us(seconds * 1e6)


def fmt_x(ratio):
    return f"{ratio:.3f}×"


def table(headers, rows, align=None):
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- running tools

class Context:
    def __init__(self, args):
        self.root = os.path.abspath(args.root)
        self.build = os.path.abspath(args.build)
        self.bin = os.path.join(self.build, "bin")
        self.out = os.path.abspath(args.out)
        self.work = os.path.join(self.build, "bench-work")
        self.profile = Profile(args.quick)
        self.jobs = max(1, args.jobs)
        self.compare_bin = os.path.join(os.path.abspath(args.compare_build), "bin") \
            if args.compare_build else None
        self.loads = []  # (section, 1-minute load average before, after, seconds)
        if not os.path.isdir(self.bin):
            raise BenchError(f"{self.bin} does not exist: build first (bench/run does)")
        os.makedirs(self.work, exist_ok=True)

    def tool(self, name, compare=False):
        path = os.path.join(self.compare_bin if compare else self.bin, name)
        if not os.access(path, os.X_OK):
            raise BenchError(f"{path} is missing: build it first (bench/run does)")
        return path

    def log(self, message):
        stamp = time.strftime("%H:%M:%S")
        print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


def run(cmd, timeout=1800, check=True):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


def json_object(text):
    """The JSON object a tool printed (mpirun may print notices before it), or None."""
    start = text.find("{")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        return None


def run_json(cmd, timeout=1800):
    out = run(cmd, timeout).stdout
    obj = json_object(out)
    if obj is None:
        raise BenchError(f"`{' '.join(cmd)}` printed no JSON object: {out[-500:]}")
    return obj


def google_benchmark(cmd, out, reps, min_time_s):
    """Runs a Google Benchmark binary; returns its per-repetition entries (times in seconds)."""
    # Repetitions interleaved at random across the benchmarks: a slow minute of a shared
    # machine then spreads over every model instead of skewing the one measured in it.
    run(cmd + [f"--benchmark_repetitions={reps}", f"--benchmark_min_time={min_time_s}",
               "--benchmark_enable_random_interleaving=true",
               f"--benchmark_out={out}", "--benchmark_out_format=json"], timeout=3600)
    with open(out) as f:
        data = json.load(f)
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    entries = []
    for entry in data["benchmarks"]:
        if entry.get("run_type") != "iteration":
            continue
        unit = scale[entry["time_unit"]]
        entries.append({"name": entry["run_name"].removesuffix("/real_time"),
                        "error": entry.get("error_message", "failed")
                        if entry.get("error_occurred") else None,
                        "wall": entry.get("real_time", 0) * unit,
                        "cpu": entry.get("cpu_time", 0) * unit})
    return entries


def timed_run(cmd):
    """Wall time and CPU time (user+sys of the child) of one run, in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run(cmd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


class Section:
    """Records the load average around a section, since timings depend on it."""

    def __init__(self, ctx, name):
        self.ctx, self.name = ctx, name

    def __enter__(self):
        self.start = time.perf_counter()
        self.load = os.getloadavg()[0]
        self.ctx.log(f"{self.name} (load average {self.load:.2f})")

    def __exit__(self, *exc):
        seconds = time.perf_counter() - self.start
        self.ctx.loads.append((self.name, self.load, os.getloadavg()[0], seconds))
        self.ctx.log(f"{self.name}: {seconds:.0f} s")


# ----------------------------------------------------------------------------- models

def prepare_models(ctx):
    models_dir = os.path.join(ctx.work, "models")
    os.makedirs(models_dir, exist_ok=True)
    models = {name: os.path.join(ctx.root, "examples", "models", f"{name}.onnx")
              for name in SHARED_MODELS}
    generate = dict(GENERATED_MODELS)
    for n in GROWTH_TENSORS:
        generate[f"mlp_{n}"] = ["mlp", "--tensors", str(n)]
    generate["runtime_mlp"] = RUNTIME_MODEL
    for name, spec in generate.items():
        path = os.path.join(models_dir, f"{name}.onnx")
        run([ctx.tool("zenopt-modelgen")] + spec + ["-o", path, "--name", name])
        models[name] = path
    for name, path in models.items():
        if not os.path.isfile(path):
            raise BenchError(f"model {name}: {path} does not exist")
    return models


def preset_clusters(ctx):
    presets = os.path.join(ctx.root, "costmodel", "presets")
    return sorted(f[:-5] for f in os.listdir(presets) if f.endswith(".json"))


# ----------------------------------------------------------------------------- 1. plan quality

def plan_quality(ctx, models, clusters):
    jobs = [(m, c, comp) for m in QUALITY_MODELS for c in clusters for comp in ("", COMPRESSORS)]

    def plan(job):
        model, cluster, comp = job
        cmd = [ctx.tool("zenopt"), models[model], "--cluster", cluster, "--json", "-q"]
        if comp:
            cmd += ["--compressor", comp]
        return job, run_json(cmd)

    with concurrent.futures.ThreadPoolExecutor(ctx.jobs) as pool:
        results = dict(pool.map(plan, jobs))

    cases, left_out = [], []
    for model in QUALITY_MODELS:
        for cluster in clusters:
            plain, comp = results[(model, cluster, "")], results[(model, cluster, COMPRESSORS)]
            if "parallel" in plain or "parallel" in comp:
                # zenopt planned tensor/pipeline parallelism (the model does not fit, or it is
                # faster): there are no data-parallel baselines to compare with.
                left_out.append(f"{model} / {cluster}")
                continue
            case = {
                "model": model, "cluster": cluster, "tensors": plain["gradient_tensors"],
                "baselines": plain["baselines"], "auto": plain["iteration_us"],
                "auto_buckets": plain["buckets"], "lower_bound": plain["lower_bound_us"],
                "compute": plain["compute_us"], "comm_bound": plain["comm_bound_us"],
                "comp": comp["iteration_us"], "comp_method": comp["compression"],
                "comp_baselines": comp["baselines"],
                "comp_baselines_uncompressed": comp["baselines_uncompressed"],
                "comp_lower_bound": comp["lower_bound_us"],
            }
            cases.append(case)
    return cases, left_out


def violations(case):
    """Comparisons auto loses: against each baseline, auto+c against each baseline at its best
    allowed compressor, and auto+c against auto (allowing compression must never hurt). All three
    hold by construction (the baselines and auto's plan seed the search), so a violation is a bug,
    and their absence is not a finding."""
    checks = [(f"auto > {b}", case["auto"], case["baselines"][b]) for b in BASELINES]
    checks += [(f"auto+c > {b} at its best", case["comp"], case["comp_baselines"][b])
               for b in BASELINES]
    checks.append(("auto+c > auto", case["comp"], case["auto"]))
    return [f"{what} ({fmt_time_us(slow)} vs {fmt_time_us(fast)}, "
            f"+{(slow / fast - 1) * 100:.2g}%)"
            for what, slow, fast in checks if slow > fast * (1 + 1e-9)]


def determinism_check(ctx, models):
    """Plans gpt2_small twice with compression allowed: the summaries and the traces (every task
    with its predicted start and duration) must be byte-identical."""
    outputs = []
    for i in range(2):
        trace = os.path.join(ctx.work, f"determinism_{i}.trace.json")
        summary = run([ctx.tool("zenopt"), models["gpt2_small"], "--compressor", COMPRESSORS,
                       "--json", "-q", "--trace", trace]).stdout
        with open(trace, "rb") as f:
            outputs.append((summary, f.read()))
    return outputs[0] == outputs[1]


# ----------------------------------------------------------------------------- 2. planner speed

def phase_bench(ctx, model_paths, reps, tag, compare=False):
    """Runs zen-phase-bench (the --compare-build one with `compare`); returns
    {"Phase/model": {"wall": [s...], "cpu": [s...]}}, with "error" instead when a phase failed."""
    entries = google_benchmark(
        [ctx.tool("zen-phase-bench", compare), "--cluster", PLANNER_CLUSTER] + model_paths,
        os.path.join(ctx.work, f"phase_bench_{tag}.json"), reps, ctx.profile.min_time_s)
    result = {}
    for entry in entries:
        slot = result.setdefault(entry["name"], {"wall": [], "cpu": []})
        if entry["error"]:
            slot["error"] = entry["error"]
        else:
            slot["wall"].append(entry["wall"])
            slot["cpu"].append(entry["cpu"])
    return result


def cli_times(ctx, models, names, reps):
    """End-to-end `zenopt MODEL --json` per model, runs interleaved across models."""
    times = {name: {"wall": [], "cpu": []} for name in names}
    for _ in range(reps):
        for name in names:
            wall, cpu = timed_run([ctx.tool("zenopt"), models[name], *E2E_ARGS.get(name, []),
                                   "--json", "-q"])
            times[name]["wall"].append(wall)
            times[name]["cpu"].append(cpu)
    return times


def build_commit(build_dir):
    """The commit a build directory was configured from (its CMake source directory's HEAD)."""
    source = None
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    source = line.split("=", 1)[1].strip()
    except OSError:
        return "unknown"
    if not source:
        return "unknown"
    commit = run(["git", "-C", source, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
    return commit or "unknown"


def compare_builds(ctx, models, clusters):
    """The planner before and after, side by side in this run: end-to-end times of
    COMPARE_MODELS (runs alternate between the builds), the plan phase over the growth models,
    and the predicted iteration time of auto and auto+c on every quality case and growth model."""
    result = {"commit": build_commit(os.path.dirname(ctx.compare_bin)), "e2e": {}, "quality": {}}
    for name in COMPARE_MODELS:
        result["e2e"][name] = {side: {"wall": [], "cpu": []} for side in ("old", "new")}
    for _ in range(ctx.profile.cli_reps):
        for name in COMPARE_MODELS:
            for side in ("old", "new"):
                wall, cpu = timed_run([ctx.tool("zenopt", side == "old"), models[name],
                                       *E2E_ARGS.get(name, []), "--json", "-q"])
                result["e2e"][name][side]["wall"].append(wall)
                result["e2e"][name][side]["cpu"].append(cpu)
    result["growth_old"] = phase_bench(ctx, [models[n] for n in GROWTH_MODELS],
                                       ctx.profile.growth_reps, "growth_old", compare=True)
    jobs = [(m, c, comp, side) for m in QUALITY_MODELS for c in clusters
            for comp in ("", COMPRESSORS) for side in ("old", "new")]
    jobs += [(m, PLANNER_CLUSTER, comp, side) for m in GROWTH_MODELS
             for comp in ("", COMPRESSORS) for side in ("old", "new")]

    def plan(job):
        model, cluster, comp, side = job
        cmd = [ctx.tool("zenopt", side == "old"), models[model], "--cluster", cluster, "--json",
               "-q"] + (["--compressor", comp] if comp else [])
        return job, run_json(cmd, timeout=3600)["iteration_us"]

    with concurrent.futures.ThreadPoolExecutor(ctx.jobs) as pool:
        for (model, cluster, comp, side), us in pool.map(plan, jobs):
            key = f"{model}|{cluster}|{'auto+c' if comp else 'auto'}"
            result["quality"].setdefault(key, {})[side] = us
    return result


def passes_bench(ctx, reps):
    """The planner's own benchmark (synthetic problems without IR): autotune time by tensor count."""
    entries = google_benchmark(
        [ctx.tool("zen-planner-bench"), "--benchmark_filter=^BM_Autotune/"],
        os.path.join(ctx.work, "passes_bench.json"), reps, ctx.profile.min_time_s)
    result = {}
    for entry in entries:
        if entry["error"]:
            raise BenchError(f"zen-planner-bench {entry['name']}: {entry['error']}")
        result.setdefault(int(entry["name"].split("/")[1]), []).append(entry["wall"])
    return result


# ----------------------------------------------------------------------------- 3. runtime

def runtime_bench(ctx, models, compute="gemm"):
    """Plans the runtime model per strategy and rank count, then runs the plans round-robin
    with `zenopt-run --compute COMPUTE` (gemm: real CPU work of each compute task's FLOPs and
    bytes; sleep: its predicted duration).

    Returns {ranks: {strategy: entry}}; an entry holds "error" when its plan could not be
    written or a launch failed, and its measurements otherwise.
    """
    zenrun = ctx.tool("zenopt-run")
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise BenchError("mpirun is not on PATH (apt-get install openmpi-bin)")
    results = {}
    for ranks in RUNTIME_RANKS:
        plans = {}
        for strategy in RUNTIME_STRATEGIES:
            path = os.path.join(ctx.work, f"runtime_np{ranks}_{strategy.replace('+', '_')}.json")
            cmd = [ctx.tool("zenopt"), models["runtime_mlp"], "--cluster", "cpu-local",
                   "--dp", str(ranks), "--strategy", strategy.split("+")[0], "-o", path,
                   "--json", "-q"]
            if strategy.endswith("+comp"):
                cmd += ["--compressor", COMPRESSORS]
            proc = run(cmd, check=False)
            if proc.returncode != 0:
                plans[strategy] = {"error": f"zenopt exited {proc.returncode}: "
                                            f"{proc.stderr.strip()}"}
                continue
            summary = json.loads(proc.stdout)
            with open(path) as f:
                compute_tasks = sum(t["kind"] == "compute" for t in json.load(f)["schedule"])
            plans[strategy] = {"path": path, "predicted": summary["iteration_us"],
                               "predicted_exposed_comm": summary["exposed_comm_us"],
                               "compute_tasks": compute_tasks,
                               "compression": summary["compression"],
                               "predicted_compute": summary["compute_us"],
                               "buckets": summary["buckets"], "measured": [], "best": [],
                               "measured_compute": [], "numerics": []}
        # The nooverlap plan without compute (--time-scale 0) measures the communication alone.
        nooverlap = plans["nooverlap"]
        calibration = {"time_scale": 0, "measured": [], "best": [], "measured_compute": [],
                       "numerics": []}
        if "error" in nooverlap:
            calibration["error"] = nooverlap["error"]
        else:
            calibration.update(path=nooverlap["path"], predicted=nooverlap["predicted_exposed_comm"])
        # Round-robin with a rotating start, so drift and position effects hit every strategy.
        order = RUNTIME_STRATEGIES + [COMM_ONLY]
        entries = dict(plans, **{COMM_ONLY: calibration})
        for round_index in range(ctx.profile.runtime_rounds):
            shift = round_index % len(order)
            for strategy in order[shift:] + order[:shift]:
                entry = entries[strategy]
                if "error" in entry:
                    continue
                cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
                       zenrun, entry["path"], "--iters", str(ctx.profile.runtime_iters), "--json",
                       "--timeout", "120", "--time-scale", str(entry.get("time_scale", 1)),
                       "--compute", compute]
                proc = run(cmd, timeout=600, check=False)
                out = json_object(proc.stdout)
                if out is None:
                    entry["error"] = (f"zenopt-run exited {proc.returncode}: "
                                      f"{proc.stderr.strip()[-500:]}")
                    continue
                entry["measured"].append(out["measured_iteration_us"])
                entry["best"].append(out["measured_best_iteration_us"])
                entry["measured_compute"].append(out["measured_compute_us"])
                entry["numerics"].append(out["numerics"])
        results[ranks] = {"plans": plans, "comm_only": calibration}
    return results


def ranking_agreement(predicted, measured, decisive=0.05):
    """Spearman rho, pairwise agreement, and agreement on pairs predicted more than 5% apart."""
    n = len(predicted)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    agree = [(predicted[i] - predicted[j]) * (measured[i] - measured[j]) > 0 for i, j in pairs]
    decisive_pairs = [k for k, (i, j) in enumerate(pairs)
                      if abs(predicted[i] - predicted[j]) > decisive * min(predicted[i], predicted[j])]
    return {"spearman": spearman(predicted, measured), "pairs": len(pairs), "agree": sum(agree),
            "decisive": len(decisive_pairs), "decisive_agree": sum(agree[k] for k in decisive_pairs)}


# ----------------------------------------------------------------------------- report

class Report:
    def __init__(self):
        self.parts = []

    def add(self, text=""):
        self.parts.append(text)

    def text(self):
        return "\n".join(self.parts).rstrip() + "\n"


def quality_section(rep, cases, left_out, plots_rel):
    rep.add("## 1. Plan quality (predicted iteration time)")
    rep.add()
    rep.add(f"Every model on every preset cluster (data parallel over all of its GPUs, the model's "
            f"own batch). `auto` searches without compression; `auto+c` may use any of "
            f"`{COMPRESSORS}` per bucket (its chosen methods are listed). The baselines in this "
            f"table are uncompressed; with compression allowed each baseline is compared at its "
            f"best (the fastest allowed compressor on every bucket, or none) in the table after. "
            f"The baselines seed auto's search, so auto is never slower than them by "
            f"construction: the speedups measure how much the search finds beyond them. "
            f"Lower bounds: LB is `lower_bound_us` of the uncompressed run, LB+c that of the run "
            f"with compressors, which also covers every allowed compressor; each is the cost "
            f"model's cheapest way to move the bytes over every algorithm, protocol and fitted "
            f"range, so no plan the model prices can beat it (docs/design.md; property-tested "
            f"over random clusters). Times are the simulator's predictions, deterministic, so "
            f"one run each."
            + (f" Left out: {', '.join(left_out)}, where zenopt plans tensor or pipeline "
               f"parallelism (section 6 covers large models)." if left_out else ""))
    rep.add()
    rows = []
    for c in cases:
        rows.append([c["model"], c["cluster"], c["tensors"]]
                    + [fmt_time_us(c["baselines"][b]) for b in BASELINES]
                    + [fmt_time_us(c["auto"]), fmt_time_us(c["comp"]), c["comp_method"],
                       fmt_time_us(c["lower_bound"]), fmt_time_us(c["comp_lower_bound"]),
                       f"{c['auto'] / c['lower_bound']:.3f}",
                       f"{c['comp'] / c['comp_lower_bound']:.3f}"])
    rep.add(table(["model", "cluster", "tensors"] + BASELINES
                  + ["auto", "auto+c", "auto+c uses", "LB", "LB+c", "auto/LB", "auto+c/LB+c"],
                  rows, ["l", "l"] + ["r"] * (len(BASELINES) + 3) + ["l"] + ["r"] * 4))
    rep.add()
    rep.add("Speedup of auto over each uncompressed baseline (baseline time / auto time; ≥ 1 "
            "means auto is at least as fast):")
    rep.add()
    rows = []
    for c in cases:
        rows.append([c["model"], c["cluster"]]
                    + [fmt_x(c["baselines"][b] / c["auto"]) for b in BASELINES]
                    + [fmt_x(min(c["baselines"].values()) / c["auto"])])
    rep.add(table(["model", "cluster"] + [f"vs {b}" for b in BASELINES]
                  + ["vs best baseline"], rows, ["l", "l"] + ["r"] * (len(BASELINES) + 1)))
    rep.add()
    rep.add(f"With compression allowed (`--compressor {COMPRESSORS}`), like with like: each "
            f"baseline at its best — the fastest allowed compressor applied to every bucket, as "
            f"DDP's communication hooks do, or none when that is faster (`zenopt --json`'s "
            f"`baselines`; the uncompressed ones are `baselines_uncompressed`) — and the "
            f"speedup of auto+c over it:")
    rep.add()
    rows = []
    for c in cases:
        fair = c["comp_baselines"]
        rows.append([c["model"], c["cluster"]]
                    + [fmt_time_us(fair[b]) for b in BASELINES]
                    + [fmt_time_us(c["comp"])]
                    + [fmt_x(fair[b] / c["comp"]) for b in BASELINES]
                    + [fmt_x(min(fair.values()) / c["comp"])])
    rep.add(table(["model", "cluster"] + [f"{b} at best" for b in BASELINES] + ["auto+c"]
                  + [f"vs {b}" for b in BASELINES] + ["vs best baseline"], rows,
                  ["l", "l"] + ["r"] * (2 * len(BASELINES) + 2)))
    rep.add()
    rep.add("Geometric mean over all model × cluster cases (the auto+c row against baselines "
            "at their best is the fair compressed comparison; against uncompressed baselines it "
            "mixes the gain of compressing with the gain of planning, and is shown only for "
            "reference):")
    rep.add()
    rows = [["auto vs uncompressed baselines"]
            + [fmt_x(geomean([c["baselines"][b] / c["auto"] for c in cases])) for b in BASELINES],
            ["**auto+c vs baselines at their best allowed compressor**"]
            + [fmt_x(geomean([c["comp_baselines"][b] / c["comp"] for c in cases]))
               for b in BASELINES],
            ["auto+c vs uncompressed baselines (reference only)"]
            + [fmt_x(geomean([c["baselines"][b] / c["comp"] for c in cases])) for b in BASELINES]]
    rep.add(table(["", *[f"vs {b}" for b in BASELINES]], rows))
    rep.add()
    lost = [(c["model"], c["cluster"], v) for c in cases for v in violations(c)]
    within = [c for c in cases if c["auto"] <= 1.05 * c["lower_bound"]]
    within_comp = [c for c in cases if c["comp"] <= 1.05 * c["comp_lower_bound"]]
    rep.add(f"- Cases where auto is slower than a baseline, auto+c slower than a baseline at its "
            f"best or than auto (true by construction, since these plans seed the search: a "
            f"sanity check, not a finding): "
            + (", ".join(f"**{m} / {cl}: {v}**" for m, cl, v in lost) if lost
               else "none") + ".")
    rep.add(f"- auto within 5% of the lower bound: **{len(within)} of {len(cases)}** cases; "
            f"auto+c within 5% of LB+c: **{len(within_comp)} of {len(cases)}**.")
    far = sorted(cases, key=lambda c: -c["auto"] / c["lower_bound"])[:5]
    rep.add("- Furthest from the bound (auto/LB; compute-bound cases have compute ≥ the "
            "communication bound, so overlap alone can reach the LB there): "
            + "; ".join(f"{c['model']} / {c['cluster']} {c['auto'] / c['lower_bound']:.3f} "
                        f"(compute {fmt_time_us(c['compute'])}, comm bound "
                        f"{fmt_time_us(c['comm_bound'])})" for c in far) + ".")
    ties = [c for c in cases if abs(min(c["baselines"].values()) / c["auto"] - 1) < 1e-3]
    rep.add(f"- auto ties the best baseline (within 0.1%) in {len(ties)} cases"
            + (": " + ", ".join(f"{c['model']} / {c['cluster']}" for c in ties) if ties else "")
            + ".")
    below = [c for c in cases if c["auto"] < c["lower_bound"] * (1 - 1e-9)
             or c["comp"] < c["comp_lower_bound"] * (1 - 1e-9)]
    rep.add("- Plans below their lower bound (a bug in the bound or the simulator): "
            + (", ".join(f"**{c['model']} / {c['cluster']}**" for c in below) if below
               else "none") + ".")
    rep.add()
    rep.add(f"![speedup per model]({plots_rel}/speedup.svg)")
    rep.add()


def speed_section(rep, ctx, phases, growth, synthetic, plots_rel):
    p = ctx.profile
    rep.add("## 2. Planner speed")
    rep.add()
    rep.add(f"In process (`zen-phase-bench`, Google Benchmark, cluster `{PLANNER_CLUSTER}`): median "
            f"wall time of {p.phase_reps} repetitions (each the mean of as many iterations as fit "
            f"in {p.min_time_s} s, at least one), with the min–max over repetitions. Import = "
            f"read + parse + shape inference + costs + backward; build IR = ModelGraph → verified "
            f"zen module; plan = the zen-autotune pass; codegen = plan emission; write plan = "
            f"the plan JSON text, which zenopt makes only for `-o` (not in the sum, not in end "
            f"to end). "
            f"End to end = `zenopt MODEL.onnx --json` as a process ({p.cli_reps} runs, "
            f"interleaved across models): start-up, import, planning, plan emission and the "
            f"summary, not writing a plan file; gpt3_175b on `bench/data/a100x64-roomy.json` "
            f"(a100x64 with GPUs that hold the replicated model: data parallelism is planned, "
            f"not the tp/pp/ZeRO search). The phases are timed as the process runs them "
            f"(each from a fresh context, teardown excluded), but for one thing: zenopt verifies "
            f"the built module on a second thread while zen-autotune searches, and build IR here "
            f"includes that verification. So the sum should not exceed end to end by more than "
            f"the verification; end to end − sum is what only the process does (loading its "
            f"shared libraries, static initialisation, registering dialects, printing the "
            f"summary; it leaves its IR to the operating system at exit).")
    rep.add()
    rows, failures, inconsistent = [], [], []
    for name, tensors, phase_list, e2e in phases:
        cells = []
        phase_list, written = phase_list[:len(PHASES)], phase_list[len(PHASES)]
        for phase_name, phase in zip(PHASES, phase_list):
            if "error" in phase:
                cells.append("**failed**")
                failures.append(f"{phase_name}/{name}: {cell_text(phase['error'], 400)}")
            else:
                lo, hi, _ = spread(phase["wall"])
                cells.append(f"{fmt_s(median(phase['wall']))} ({fmt_s(lo)}–{fmt_s(hi)})")
        measured = [ph for ph in phase_list if "error" not in ph]
        partial = "*" if len(measured) < len(phase_list) else ""
        total = sum(median(ph["wall"]) for ph in measured)
        cpu_total = sum(median(ph["cpu"]) for ph in measured)
        lo, hi, _ = spread(e2e["wall"])
        rest = median(e2e["wall"]) - total
        if rest < 0:
            inconsistent.append(f"{name} (sum exceeds end to end by {fmt_s(-rest)}, "
                                f"{-rest / median(e2e['wall']) * 100:.0f}%)")
        cells.append("—" if written is None or "error" in written
                     else fmt_s(median(written["wall"])))
        rows.append([name, tensors] + cells + [fmt_s(total) + partial, fmt_s(cpu_total) + partial,
                    f"{fmt_s(median(e2e['wall']))} ({fmt_s(lo)}–{fmt_s(hi)})",
                    fmt_s(median(e2e["cpu"])), ("−" if rest < 0 else "") + fmt_s(abs(rest))])
    rep.add(table(["model", "tensors", "import", "build IR", "plan", "codegen", "write plan",
                   "sum (wall)", "sum (CPU)", "end to end (wall)", "end to end (CPU)",
                   "end to end − sum"], rows))
    rep.add()
    rep.add("Phase sum ≤ end to end: " + ("**yes**, for every model." if not inconsistent else
            "**no** for " + ", ".join(inconsistent) + " (zenopt verifies the module beside the "
            "search, which build IR counts; and the phases and the process ran at different "
            "times: compare the min–max spreads and the machine load in section 4)."))
    rep.add()
    if failures:
        rep.add("Failed phases (* = sum without them):")
        rep.add()
        rep.add("\n".join(f"- {f}" for f in failures))
        rep.add()
    rep.add("Targets (end-to-end wall time, median):")
    rep.add()
    for name, limit, seconds, cpu in targets(phases):
        verdict = "met" if seconds <= limit else "**missed**"
        rep.add(f"- {name} plans in {fmt_s(seconds)} (CPU {fmt_s(cpu)}; target ≤ {fmt_s(limit)}): "
                f"{verdict}.")
    rep.add()
    rep.add(f"Growth with tensor count: generated deep MLPs (`zenopt-modelgen mlp --tensors N`), "
            f"plan phase in process, median of {p.growth_reps} repetitions:")
    rep.add()
    xs = [g["tensors"] for g in growth]
    regimes = regime_fits(xs, [median(g["wall"]) for g in growth])
    rows = [[g["name"], g["tensors"], fmt_s(median(g["wall"])),
             f"{fmt_s(min(g['wall']))}–{fmt_s(max(g['wall']))}", fmt_s(median(g["cpu"])),
             f"{median(g['wall']) / g['tensors'] * 1e6:.0f} µs"] for g in growth]
    rep.add(table(["model", "tensors", "plan (wall)", "min–max", "plan (CPU)", "per tensor"], rows))
    rep.add()
    local = [f"{a['tensors']}→{b['tensors']}: "
             f"{math.log(median(b['wall']) / median(a['wall'])) / math.log(b['tensors'] / a['tensors']):.2f}"
             for a, b in zip(growth, growth[1:])]
    rep.add(f"Growth exponent per regime (log-log fits, planning time ∝ tensors^k, 1.0 = linear; a "
            f"break is fitted only where two lines explain the data clearly better than one): "
            f"{fmt_regimes(regimes)}. Local exponents between neighbouring sizes: "
            f"{', '.join(local)}. Target: ≤ {GROWTH_EXPONENT_TARGET} in every regime: "
            + ("met." if all(k <= GROWTH_EXPONENT_TARGET for _, _, k in regimes)
               else "**missed**."))
    if synthetic:
        sx = sorted(synthetic)
        rep.add(f"The planner's own benchmark (`zen-planner-bench` BM_Autotune: synthetic problems, "
                f"autotune only, no IR) gives "
                + ", ".join(f"{n} tensors {fmt_s(median(synthetic[n]))}" for n in sx)
                + f": exponents {fmt_regimes(regime_fits(sx, [median(synthetic[n]) for n in sx]))}.")
    rep.add()
    rep.add(f"![planning time against tensor count]({plots_rel}/planning_time.svg)")
    rep.add()
    return regimes


def compare_section(rep, compare, tensors):
    """Before and after: the planner of --compare-build's commit against this one, same run."""
    old_label, new_label = f"before ({compare['commit']})", "after (this commit)"
    rep.add("### Before and after, side by side")
    rep.add()
    rep.add(f"The same measurements with the build of commit {compare['commit']} "
            f"(`bench/run --compare-build DIR`), in this run: end to end = `zenopt MODEL.onnx "
            f"--json` on `{PLANNER_CLUSTER}` (gpt3_175b on `a100x64-roomy`), runs alternating "
            f"between the two builds, median "
            f"of {len(next(iter(compare['e2e'].values()))['old']['wall'])}.")
    rep.add()
    rows = []
    for name, sides in compare["e2e"].items():
        old, new = median(sides["old"]["wall"]), median(sides["new"]["wall"])
        limit = TARGETS.get(name)
        rows.append([name, tensors.get(name, ""), fmt_s(old), fmt_s(new),
                     fmt_s(median(sides["old"]["cpu"])), fmt_s(median(sides["new"]["cpu"])),
                     f"{old / new:.2f}×",
                     (f"≤ {fmt_s(limit)}: " + ("met" if new <= limit else "**missed**"))
                     if limit else ""])
    rep.add(table(["model", "tensors", f"{old_label} wall", f"{new_label} wall",
                   "before CPU", "after CPU", "speed-up", "target"], rows))
    rep.add()
    growth_old = compare["growth_old"]
    rows, xs, old_ys = [], [], []
    for n in GROWTH_MODELS:
        entry = growth_old.get(f"Plan/{n}", {"error": "not run"})
        if "error" in entry:
            rows.append([n, tensors.get(n, ""), f"failed: {cell_text(entry['error'], 80)}"])
            continue
        xs.append(tensors[n])
        old_ys.append(median(entry["wall"]))
        rows.append([n, tensors[n], fmt_s(old_ys[-1])])
    if len(xs) >= 2:
        rep.add(f"Plan phase in process (`zen-phase-bench`, median of the growth repetitions) "
                f"with the earlier build: growth exponents "
                f"{fmt_regimes(regime_fits(xs, old_ys))} (this commit's are above). The "
                f"earlier build's zen-phase-bench may time the phase differently from this "
                f"one (up to 36809c0 it planned in a multi-threaded MLIRContext and verified "
                f"the module after the pass, which zenopt does neither of), so compare planner "
                f"speed across builds in the end-to-end table above.")
        rep.add()
        rep.add(table(["model", "tensors", f"plan, {old_label}"], rows))
        rep.add()
    better, equal, worse = [], [], []
    for key, sides in sorted(compare["quality"].items()):
        if "old" not in sides or "new" not in sides:
            continue
        ratio = sides["new"] / sides["old"]
        (worse if ratio > 1 + 1e-9 else better if ratio < 1 - 1e-9 else equal).append(
            (key.replace("|", " / "), ratio))
    total = len(better) + len(equal) + len(worse)
    rep.add(f"Plan quality, predicted iteration time of auto and auto+c on every model × "
            f"cluster case and every growth model on `{PLANNER_CLUSTER}` ({total} plans), after "
            f"against before: **{len(better)} faster, {len(equal)} equal, {len(worse)} slower**"
            + (": " + "; ".join(f"{k} +{(r - 1) * 100:.2g}%" for k, r in worse) if worse else "")
            + (f". Largest gain: {min(better, key=lambda e: e[1])[0]} "
               f"{(1 - min(r for _, r in better)) * 100:.2g}% faster." if better else "."))
    comp_worse = []
    for key, sides in compare["quality"].items():
        model, cluster, mode = key.split("|")
        if mode == "auto+c" and "new" in sides:
            plain = compare["quality"].get(f"{model}|{cluster}|auto", {}).get("new")
            if plain is not None and sides["new"] > plain * (1 + 1e-9):
                comp_worse.append(f"{model} / {cluster}")
    rep.add(f"More compressors allowed never plans worse (auto+c ≤ auto) at every size, growth "
            f"models included: " + ("**violated** for " + ", ".join(sorted(comp_worse))
                                    if comp_worse else "holds") + ".")
    rep.add()


def targets(phases):
    """(model, limit s, end-to-end wall median s, its CPU median s) for the models with a target."""
    return [(name, TARGETS[name], median(e2e["wall"]), median(e2e["cpu"]))
            for name, _, _, e2e in phases if name in TARGETS]


def cell_text(message, limit=160):
    """One table cell: a single line, pipes escaped, long messages cut."""
    text = " ".join(str(message).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def runtime_section(rep, ctx, runtime, plots_rel):
    p = ctx.profile
    rep.add("## 3. Runtime: measured against predicted (cpu-local)")
    rep.add()
    rep.add(f"Model `zenopt-modelgen {' '.join(RUNTIME_MODEL)}`, planned with `zenopt MODEL "
            f"--cluster cpu-local --dp N --strategy S -o PLAN` (auto+comp adds `--compressor "
            f"{COMPRESSORS}`), executed with `mpirun --allow-run-as-root --oversubscribe -np N "
            f"zenopt-run PLAN --iters {p.runtime_iters} --json --compute gemm` (each compute task "
            f"runs as real CPU work: a GEMM of its FLOPs and a memory pass of its bytes; real MPI "
            f"collectives; numerics checked). The `cpu-local` preset was fitted on this same "
            f"machine. Each launch reports the mean "
            f"iteration after one warm-up, slowest rank; {p.runtime_rounds} launches per plan, "
            f"round-robin across strategies with a rotating start. Ratios to the reference "
            f"(auto, or the first strategy that ran if auto did not) are taken within each round, "
            f"then the median.")
    rep.add()
    agreements = {}
    for ranks, result in runtime.items():
        plans, comm_only = result["plans"], result["comm_only"]
        ran = [s for s in RUNTIME_STRATEGIES if "error" not in plans[s]]
        reference = "auto" if "auto" in ran else (ran[0] if ran else None)
        rep.add(f"**-np {ranks}**" + (f" (reference: {reference})" if reference != "auto" else ""))
        rep.add()
        rows = []
        for strategy in RUNTIME_STRATEGIES:
            e = plans[strategy]
            if "error" in e:
                rows.append([strategy] + ["–"] * 9 + [f"**failed**: {cell_text(e['error'])}"])
                continue
            ref = plans[reference]
            m = median(e["measured"])
            lo, hi, _ = spread(e["measured"])
            ratio = median([a / b for a, b in zip(e["measured"], ref["measured"])])
            numerics = "ok" if all(n == "ok" for n in e["numerics"]) else "**numerics failed**"
            rows.append([strategy, e["compression"], e["buckets"], fmt_time_us(e["predicted"]),
                         fmt_time_us(m), f"{fmt_time_us(lo)}–{fmt_time_us(hi)}",
                         fmt_time_us(median(e["best"])),
                         f"{(m - e['predicted']) / e['predicted'] * 100:+.1f}%",
                         f"{e['predicted'] / ref['predicted']:.3f}", f"{ratio:.3f}", numerics])
        rep.add(table(["strategy", "compression", "buckets", "predicted", "measured (median)",
                       "min–max", "best iteration (median)", "error", "predicted / ref",
                       "measured / ref", "status"], rows,
                      ["l", "l"] + ["r"] * 8 + ["l"]))
        rep.add()
        if len(ran) < 2:
            rep.add("Too few strategies ran to compare rankings.")
            rep.add()
            continue
        predicted = [plans[s]["predicted"] for s in ran]
        measured = [median(plans[s]["measured"]) for s in ran]
        agreement = ranking_agreement(predicted, measured)
        agreements[ranks] = agreement
        best_rho = spearman(predicted, [median(plans[s]["best"]) for s in ran])
        offsets = [median(plans[s]["measured"]) - plans[s]["predicted"] for s in ran]
        tasks = sorted({plans[s]["compute_tasks"] for s in ran})
        rep.add(f"Ranking over the {len(ran)} strategies that ran: Spearman ρ = "
                f"**{agreement['spearman']:.2f}** between predicted and measured; pairwise order "
                f"agrees on {agreement['agree']} of {agreement['pairs']} pairs, and on "
                f"{agreement['decisive_agree']} of {agreement['decisive']} pairs predicted more "
                f"than 5% apart (ρ = {best_rho:.2f} on the best iterations). Fastest predicted: "
                f"{ran[predicted.index(min(predicted))]}, fastest measured: "
                f"{ran[measured.index(min(measured))]}. Measured exceeds predicted by "
                f"{fmt_time_us(min(offsets))} to {fmt_time_us(max(offsets))} per iteration "
                f"(median {fmt_time_us(median(offsets))}); zenopt-run runs "
                f"{', '.join(map(str, tasks))} compute tasks per iteration as real work, and "
                f"{ranks} ranks share the 2 cores with everything else running."
                + (f" Communication alone (the nooverlap plan with `--time-scale 0`) measures "
                   f"{fmt_time_us(median(comm_only['measured']))} (best iteration "
                   f"{fmt_time_us(median(comm_only['best']))}) against "
                   f"{fmt_time_us(comm_only['predicted'])} predicted: "
                   f"{median(comm_only['measured']) / comm_only['predicted']:.2f}× the cost "
                   f"model's `cpu-local` communication time."
                   if "error" not in comm_only and comm_only["measured"] else ""))
        rep.add()
    rep.add(f"![measured against predicted iteration time]({plots_rel}/runtime.svg)")
    rep.add()
    return agreements


def noise_section(rep, ctx, speed_spreads, runtime, deterministic):
    rep.add("## 4. Noise handling")
    rep.add()
    p = ctx.profile
    runtime_spreads = [spread(e["measured"])[2] for result in runtime.values()
                       for e in result["plans"].values() if e.get("measured")]
    rep.add(f"- Predictions (section 1) are deterministic: planning gpt2_small twice with "
            f"compression allowed gives {'byte-identical' if deterministic else '**different**'} "
            f"summaries and traces, so each case is planned once.")
    rep.add(f"- Timings are medians of repeated runs ({p.phase_reps} repetitions per phase, "
            f"{p.growth_reps} for the growth curve, {p.cli_reps} end-to-end runs, "
            f"{p.runtime_rounds} launches × {p.runtime_iters} iterations per runtime plan); "
            f"the planner benchmarks' repetitions are interleaved at random across models; "
            f"tables show the min–max. Largest relative spread (max−min)/median: planner phases "
            f"{max(speed_spreads) * 100:.0f}%"
            + (f", runtime launches {max(runtime_spreads) * 100:.0f}%" if runtime_spreads else "")
            + ".")
    rep.add("- Comparisons are ratios measured side by side in this one run: baselines and auto "
            "come from the same planner invocation; runtime ratios to auto are taken per round "
            "of the round-robin before the median.")
    rep.add("- CPU time is reported next to wall time: the machine is shared, and CPU time is "
            "the less load-sensitive of the two. One-minute load average per section "
            "(before → after):")
    rep.add()
    rep.add(table(["section", "load before", "load after", "duration"],
                  [[n, f"{a:.2f}", f"{b:.2f}", fmt_s(s)] for n, a, b, s in ctx.loads]))
    rep.add()


def plots(cases, growth, runtime, plots_dir):
    os.makedirs(plots_dir, exist_ok=True)
    models = list(dict.fromkeys(c["model"] for c in cases))
    values = [[geomean([c["baselines"][b] / c["auto"] for c in cases if c["model"] == m])
               for b in BASELINES] for m in models]
    svgplot.grouped_bars(os.path.join(plots_dir, "speedup.svg"),
                         "auto: predicted speedup over each baseline (geomean over clusters)",
                         models, [f"vs {b}" for b in BASELINES], values, "speedup (×)",
                         base=1.0)
    xs = [g["tensors"] for g in growth]
    ys = [median(g["wall"]) for g in growth]
    fits = []
    for lo, hi, k in regime_fits(xs, ys):
        segment = [(x, y) for x, y in zip(xs, ys) if lo <= x <= hi]
        _, c = loglog_fit([x for x, _ in segment], [y for _, y in segment])
        fits.append((f"{lo}–{hi}: ∝ n^{k:.2f}", [(x, math.exp(c) * x ** k) for x in (lo, hi)],
                     False))
    linear = [(x, ys[0] * x / xs[0]) for x in (min(xs), max(xs))]
    svgplot.scatter(os.path.join(plots_dir, "planning_time.svg"),
                    "planning time against gradient tensors (deep MLPs)",
                    [("plan phase, median", list(zip(xs, ys)))], "gradient tensors",
                    "planning time (s)", log_x=True, log_y=True,
                    lines=fits + [("linear", linear, True)])
    if any("error" not in e for result in runtime.values() for e in result["plans"].values()):
        series = []
        for ranks, result in runtime.items():
            plans = result["plans"]
            series.append((f"-np {ranks}", [(e["predicted"] / 1e3, median(e["measured"]) / 1e3)
                                            for e in plans.values() if "error" not in e]))
        top = max((y for _, pts in series for p in pts for y in p), default=1.0)
        svgplot.scatter(os.path.join(plots_dir, "runtime.svg"),
                        "zenopt-run on cpu-local: measured vs predicted iteration",
                        series, "predicted (ms)", "measured (ms)",
                        lines=[("measured = predicted", [(0, 0), (top, top)], True)])


def headline(ctx, cases, speed, runtime, runtime_agree, total_s, build_s):
    """The summary bullets at the top of RESULTS.md (also copied into the README)."""
    auto_gm = {b: geomean([c["baselines"][b] / c["auto"] for c in cases]) for b in BASELINES}
    comp_gm = {b: geomean([c["comp_baselines"][b] / c["comp"] for c in cases]) for b in BASELINES}
    worst = max(cases, key=lambda c: c["auto"] / c["lower_bound"])
    lost = [v for c in cases for v in violations(c)]
    lost_to_baselines = [v for v in lost if not v.startswith("auto+c")]
    comp_worse = [c for c in cases if c["comp"] > c["auto"] * (1 + 1e-9)]
    within = sum(c["auto"] <= 1.05 * c["lower_bound"] for c in cases)
    phases, regimes = speed
    bullets = [
        f"**Plan quality** ({len(cases)} model × cluster cases, predicted): `--strategy auto` is "
        f"faster than each baseline by a geometric mean of "
        + ", ".join(f"**{auto_gm[b]:.2f}×** ({b})" for b in BASELINES)
        + "; with compression allowed, against each baseline at its best allowed compressor "
        "(or none), "
        + ", ".join(f"{comp_gm[b]:.2f}× ({b})" for b in BASELINES) + ". "
        + ("The baselines seed auto's search, so auto is never slower than them by "
           "construction. " if not lost_to_baselines else
           f"**auto is slower than a baseline in {len(lost_to_baselines)} comparisons (a bug: "
           f"the baselines seed the search).** ")
        + f"auto is within 5% of the lower bound in {within} of {len(cases)} cases; worst "
        f"auto/LB = {worst['auto'] / worst['lower_bound']:.3f} ({worst['model']} on "
        f"{worst['cluster']})."
        + (f" Allowing compression gave a slower plan than auto without it in "
           f"{len(comp_worse)} case{'s' if len(comp_worse) > 1 else ''} (by up to "
           f"{max(c['comp'] / c['auto'] - 1 for c in comp_worse) * 100:.2g}%)."
           if comp_worse else ""),
        "**Planner speed** (end to end, median): "
        + "; ".join(f"{name} {fmt_s(seconds)} wall, {fmt_s(cpu)} CPU (target ≤ {fmt_s(limit)}: "
                    f"{'met' if seconds <= limit else '**missed**'})"
                    for name, limit, seconds, cpu in targets(phases))
        + "".join(f"; {name} {fmt_s(median(e2e['wall']))}" for name, _, _, e2e in phases
                  if name in GENERATED_MODELS and name not in TARGETS)
        + f". Planning time growth exponent per regime (deep MLPs): "
        + fmt_regimes(regimes).replace("**", "") + ".",
    ]
    if runtime:
        errors = [abs(median(e["measured"]) / e["predicted"] - 1)
                  for result in runtime.values() for e in result["plans"].values()
                  if "error" not in e]
        failed = [f"{s} at -np {r}" for r, result in runtime.items()
                  for s, e in result["plans"].items() if "error" in e]
        bullets.append(
            "**Runtime** (zenopt-run on cpu-local): median |measured − predicted| "
            f"{median(errors) * 100:.0f}% of the prediction; predicted vs measured strategy "
            "ranking: " + ", ".join(f"Spearman ρ = {a['spearman']:.2f} at -np {r}"
                                    for r, a in runtime_agree.items())
            + (f"; **failed: {', '.join(failed)}** (section 3)" if failed else "") + ".")
    failed_phases = [f"{phase}/{name}" for name, _, phase_list, _ in phases
                     for phase, data in zip(PHASES, phase_list) if "error" in data]
    if failed_phases:
        bullets.append(f"**Failures**: {', '.join(failed_phases)} (section 2).")
    bullets.append(f"This run: {fmt_s(total_s)} of measurement"
                   + (f" after {fmt_s(build_s)} of build" if build_s is not None else "")
                   + f" ({'quick profile, noisy' if ctx.profile.quick else 'full profile'}).")
    return "\n".join(f"- {b}" for b in bullets)


def host_line(ctx):
    commit = run(["git", "-C", ctx.root, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
    dirty = run(["git", "-C", ctx.root, "status", "--porcelain", "--untracked-files=no"],
                check=False).stdout.strip()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"Generated by `bench/run` on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, "
            f"commit {commit or 'unknown'}{' (with uncommitted changes)' if dirty else ''}, "
            f"{os.cpu_count()} × {cpu}, Python {platform.python_version()}. Do not edit by hand.")


def measure(ctx, skip_runtime):
    """Runs every measurement; returns the raw results (JSON-serialisable)."""
    start = time.perf_counter()
    raw = {"host": host_line(ctx), "quick": ctx.profile.quick}
    with Section(ctx, "models"):
        models = prepare_models(ctx)
        raw["clusters"] = preset_clusters(ctx)
        raw["tensors"] = {name: run_json([ctx.tool("zenopt"), "inspect", path, "--json"])
                          ["trainable_tensors"] for name, path in models.items()}
    with Section(ctx, "1. plan quality"):
        raw["cases"], raw["quality_left_out"] = plan_quality(ctx, models, raw["clusters"])
        raw["deterministic"] = determinism_check(ctx, models)
    with Section(ctx, "2. planner phases"):
        raw["phases"] = phase_bench(ctx, [models[n] for n in SPEED_MODELS],
                                    ctx.profile.phase_reps, "phases")
    with Section(ctx, "2. end-to-end CLI"):
        raw["cli"] = cli_times(ctx, models, SPEED_MODELS + LARGE_GROWTH_MODELS,
                               ctx.profile.cli_reps)
    with Section(ctx, "2. growth curve"):
        raw["growth"] = phase_bench(ctx, [models[n] for n in GROWTH_MODELS],
                                    ctx.profile.growth_reps, "growth")
        raw["synthetic"] = passes_bench(ctx, ctx.profile.growth_reps) \
            if os.access(os.path.join(ctx.bin, "zen-planner-bench"), os.X_OK) else {}
    if ctx.compare_bin:
        with Section(ctx, "2. before and after"):
            raw["compare"] = compare_builds(ctx, models, raw["clusters"])
    raw["runtime"], raw["runtime_error"] = {}, "left out with --skip-runtime"
    if not skip_runtime:
        with Section(ctx, "3. runtime"):
            try:
                raw["runtime"], raw["runtime_error"] = runtime_bench(ctx, models), None
            except BenchError as error:
                raw["runtime_error"] = str(error)
                ctx.log(f"runtime section failed: {error}")
    raw["loads"] = ctx.loads
    raw["measure_s"] = time.perf_counter() - start
    return raw


def render(ctx, raw, build_s):
    """Writes RESULTS.md and the plots from the raw results."""
    cases, tensors, cli = raw["cases"], raw["tensors"], raw["cli"]
    runtime = {int(k): v for k, v in raw["runtime"].items()}
    synthetic = {int(k): v for k, v in raw["synthetic"].items()}
    ctx.loads = raw["loads"]

    def phase_rows(names, data):
        return [(name, tensors[name], [data[f"{ph}/{name}"] for ph in PHASES]
                 + [data.get(f"{WRITE_PHASE}/{name}")], cli[name])
                for name in names]

    phases = (phase_rows(SPEED_MODELS, raw["phases"])
              + phase_rows(LARGE_GROWTH_MODELS, raw["growth"]))
    growth = [{"name": n, "tensors": tensors[n], **raw["growth"][f"Plan/{n}"]}
              for n in GROWTH_MODELS if "error" not in raw["growth"][f"Plan/{n}"]]
    if len(growth) < 2:
        raise BenchError("the growth curve needs at least two models that plan: "
                         + "; ".join(f"{n}: {raw['growth'][f'Plan/{n}'].get('error')}"
                                     for n in GROWTH_MODELS))
    speed_spreads = [spread(v["wall"])[2] for v in list(raw["phases"].values())
                     + list(raw["growth"].values()) if "error" not in v]

    plots_dir = os.path.join(ctx.out, "plots")
    plots(cases, growth, runtime, plots_dir)

    body = Report()
    quality_section(body, cases, raw.get("quality_left_out", []), "plots")
    regimes = speed_section(body, ctx, phases, growth, synthetic, "plots")
    if raw.get("compare"):
        compare_section(body, raw["compare"], tensors)
    agreements = {}
    if runtime:
        agreements = runtime_section(body, ctx, runtime, "plots")
    else:
        body.add("## 3. Runtime: measured against predicted (cpu-local)")
        body.add()
        body.add(f"Not measured in this run: {raw['runtime_error']}.")
        body.add()
    noise_section(body, ctx, speed_spreads, runtime, raw["deterministic"])

    rep = Report()
    rep.add("# zenopt benchmark results")
    rep.add()
    rep.add(raw["host"])
    rep.add()
    summary = headline(ctx, cases, (phases, regimes), runtime, agreements, raw["measure_s"],
                       build_s)
    rep.add(summary)
    rep.add()
    rep.add(body.text())
    os.makedirs(ctx.out, exist_ok=True)
    results = os.path.join(ctx.out, "RESULTS.md")
    text = rep.text()
    for start_marker, end_marker in KEPT_SECTIONS:
        kept = kept_section(results, start_marker, end_marker)
        if kept:
            text = text.rstrip("\n") + "\n\n" + kept + "\n"
    with open(results + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(results + ".tmp", results)
    ctx.log(f"wrote {results} and {plots_dir}/*.svg")
    # Only the committed report (bench/RESULTS.md) feeds the README, never a scratch --out.
    if os.path.samefile(ctx.out, os.path.join(ctx.root, "bench")):
        update_readme(ctx, summary)


README_START, README_END = "<!-- bench/run: headline -->", "<!-- bench/run: end -->"
# bench/pytorch/run and the scripts under bench/largemodel and bench/moe write their own
# sections of RESULTS.md between these markers; a bench/run keeps them.
KEPT_SECTIONS = [("<!-- bench/pytorch: start -->", "<!-- bench/pytorch: end -->"),
                 ("<!-- bench/scripts: start -->", "<!-- bench/scripts: end -->")]


def kept_section(results, start_marker, end_marker):
    """The marked section of an existing RESULTS.md, or None."""
    if not os.path.exists(results):
        return None
    with open(results, encoding="utf-8") as f:
        text = f.read()
    start, end = text.find(start_marker), text.find(end_marker)
    return text[start:end + len(end_marker)] if 0 <= start < end else None


def update_readme(ctx, summary):
    """Replaces the lines between the README's bench markers with the headline, so the numbers
    the README quotes come from the run too. Nothing happens when the markers are missing."""
    path = os.path.join(ctx.root, "README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        ctx.log(f"{path}: no '{README_START}' ... '{README_END}' block; README left alone")
        return
    text = text[:start + len(README_START)] + "\n" + summary + "\n" + text[end:]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    ctx.log(f"updated the headline in {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    parser.add_argument("--build", required=True, help="build directory with bin/")
    parser.add_argument("--out", required=True, help="where RESULTS.md and plots/ go")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (noisy)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="parallel zenopt runs for section 1 (predictions only)")
    parser.add_argument("--build-seconds", type=float, default=None)
    parser.add_argument("--skip-runtime", action="store_true", help="leave out section 3")
    parser.add_argument("--compare-build", default=None,
                        help="build directory of an earlier commit (bin/zenopt, "
                             "bin/zen-phase-bench): planner speed and quality side by side")
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite the report from the last run's raw results (BUILD/bench-work/raw.json)")
    args = parser.parse_args()
    ctx = Context(args)
    raw_path = os.path.join(ctx.work, "raw.json")
    if args.render_only:
        with open(raw_path) as f:
            raw = json.load(f)
        ctx.profile = Profile(raw["quick"])
    else:
        raw = measure(ctx, args.skip_runtime)
        raw["build_s"] = args.build_seconds
        with open(raw_path, "w") as f:
            json.dump(raw, f, indent=1)
    render(ctx, raw, raw.get("build_s"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, subprocess.TimeoutExpired) as error:
        print(f"bench: error: {error}", file=sys.stderr)
        sys.exit(1)
