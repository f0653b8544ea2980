"""Step time of the CNN example with zenopt against torch DistributedDataParallel (gloo).

Run under mpirun (bench/pytorch/run does): every rank trains examples/pytorch/train_cnn.py's
model on the same synthetic batches twice over, once with DDP on a gloo process group and once
with zenopt.torch's DistributedOptimizer, in alternating rounds of STEPS steps within the
one job, so both see the same ranks, data and machine load. A round's time per step is the
slowest rank's; the ratio zenopt / DDP is taken per round and the median reported. Rank 0
prints one JSON object and, with --results, writes its section of bench/RESULTS.md.
"""
import argparse
import copy
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import zenopt.torch
from zenopt import world

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
from train_cnn import CNN, SyntheticImages  # noqa: E402

START, END = "<!-- bench/pytorch: start -->", "<!-- bench/pytorch: end -->"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def timed_steps(model, optimizer, batches):
    """(wall seconds per step, the slowest rank's; CPU seconds per step, all ranks' threads
    together). CPU time shows what a trainer costs apart from waiting on a loaded machine."""
    dist.barrier()
    start, start_cpu = time.perf_counter(), time.process_time()
    for images, labels in batches:
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
    elapsed = (time.perf_counter() - start) / len(batches)
    cpu = (time.process_time() - start_cpu) / len(batches)
    slowest = torch.tensor([elapsed], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    total_cpu = torch.tensor([cpu], dtype=torch.float64)
    dist.all_reduce(total_cpu, op=dist.ReduceOp.SUM)
    return slowest.item(), total_cpu.item()


def measure(args, rank, size):
    # DDP's process group on gloo; rank 0 picks the port and tells the others.
    port = int(world.broadcast_bytes(str(free_port()).encode() if rank == 0 else None))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size)
    local_ranks = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_ranks))
    torch.manual_seed(0)
    initial = CNN()
    data = SyntheticImages(args.batch, rank)
    batches = [data.next() for _ in range(args.steps)]

    # broadcast_buffers=False: zenopt does not synchronise BatchNorm statistics, so DDP does
    # not either (the work compared is the gradient averaging).
    ddp_model = DistributedDataParallel(copy.deepcopy(initial), broadcast_buffers=False)
    ddp_optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.02, momentum=0.9)
    zen_model = copy.deepcopy(initial)
    images, labels = batches[0]
    plan = zenopt.torch.plan(zen_model, images, loss_fn=lambda out: F.cross_entropy(out, labels))
    zen_optimizer = zenopt.torch.DistributedOptimizer(
        torch.optim.SGD(zen_model.parameters(), lr=0.02, momentum=0.9), zen_model, plan)

    trainers = {"ddp": (ddp_model, ddp_optimizer), "zenopt": (zen_model, zen_optimizer)}
    timeline = {"ddp": [], "zenopt": []}
    cpu = {"ddp": [], "zenopt": []}
    for round_index in range(args.rounds + 1):  # round 0 warms up
        order = ["ddp", "zenopt"] if round_index % 2 else ["zenopt", "ddp"]
        for name in order:
            seconds, cpu_seconds = timed_steps(*trainers[name], batches)
            if round_index > 0:
                timeline[name].append(seconds)
                cpu[name].append(cpu_seconds)
    zen_optimizer.close()
    dist.destroy_process_group()
    ratios = [z / d for z, d in zip(timeline["zenopt"], timeline["ddp"])]
    return {
        "ranks": size, "batch_per_rank": args.batch, "steps_per_round": args.steps,
        "rounds": args.rounds, "parameters": sum(p.numel() for p in initial.parameters()),
        "plan": str(plan), "plan_buckets": plan.summary["buckets"],
        "plan_strategy": plan.summary["strategy"], "plan_cluster": plan.summary["cluster"],
        "plan_compute_source": plan.summary["compute_source"],
        "predicted_ms": plan.summary["iteration_us"] / 1000,
        "ddp_ms": [1000 * s for s in timeline["ddp"]],
        "zenopt_ms": [1000 * s for s in timeline["zenopt"]],
        "ratios": ratios, "ratio_median": statistics.median(ratios),
        "ddp_ms_median": 1000 * statistics.median(timeline["ddp"]),
        "zenopt_ms_median": 1000 * statistics.median(timeline["zenopt"]),
        "ddp_cpu_ms_median": 1000 * statistics.median(cpu["ddp"]),
        "zenopt_cpu_ms_median": 1000 * statistics.median(cpu["zenopt"]),
        "load_average": os.getloadavg()[0], "torch": torch.__version__,
    }


def section(result, root):
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    per_round = ", ".join(f"{r:.3f}" for r in result["ratios"])
    return "\n".join([
        START,
        "## 5. PyTorch: zenopt against DistributedDataParallel",
        "",
        f"Generated by `bench/pytorch/run` on {time.strftime('%Y-%m-%d %H:%M')}, commit "
        f"{commit}, torch {result['torch']}, {os.cpu_count()} cores, load average "
        f"{result['load_average']:.2f} at the end.",
        "",
        f"The CNN of `examples/pytorch/train_cnn.py` ({result['parameters']} parameters, "
        f"batch {result['batch_per_rank']} per rank, SGD with momentum) trained under "
        f"`mpirun -np {result['ranks']}` on the same synthetic batches by "
        "`DistributedDataParallel` (gloo, default 25 MB buckets, `broadcast_buffers=False`) and "
        "by `zenopt.torch.DistributedOptimizer` with `zenopt.torch.plan(model, batch)` "
        f"(the job's own profile, `{result['plan_cluster']}`, and its own timed steps: "
        f"{result['plan_strategy']}, {result['plan_buckets']} buckets), in "
        f"{result['rounds']} alternating rounds of {result['steps_per_round']} "
        "steps after a warm-up round, in one job. Time per step is the slowest rank's; CPU "
        "time per step is all ranks' together (every thread), which waiting does not inflate.",
        "",
        "| trainer | step time (median) | min–max | CPU time per step (median) |",
        "|:--|--:|--:|--:|",
        f"| DDP (gloo) | {result['ddp_ms_median']:.1f} ms | {min(result['ddp_ms']):.1f}–"
        f"{max(result['ddp_ms']):.1f} ms | {result['ddp_cpu_ms_median']:.1f} ms |",
        f"| zenopt | {result['zenopt_ms_median']:.1f} ms | {min(result['zenopt_ms']):.1f}–"
        f"{max(result['zenopt_ms']):.1f} ms | {result['zenopt_cpu_ms_median']:.1f} ms |",
        "",
        f"**zenopt / DDP step time: {result['ratio_median']:.3f}** (median of the per-round "
        f"ratios {per_round}).",
        "",
        f"The plan predicted a step of {result['predicted_ms']:.1f} ms (compute "
        f"{result['plan_compute_source']}); zenopt measured {result['zenopt_ms_median']:.1f} "
        f"ms: {100 * (result['zenopt_ms_median'] / result['predicted_ms'] - 1):+.1f}%.",
        END,
    ])


def write_section(path, text):
    """Replaces the section between the markers, or appends it; the rest stays as it is."""
    content = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            content = file.read()
    start, end = content.find(START), content.find(END)
    if start >= 0 and end > start:
        content = content[:start] + text + content[end + len(END):]
    else:
        content = (content.rstrip("\n") + "\n\n" if content else "") + text + "\n"
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        file.write(content)
    os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--results", help="RESULTS.md whose PyTorch section to write")
    args = parser.parse_args()
    rank, size = zenopt.torch.init()
    result = measure(args, rank, size)
    if rank == 0:
        print(json.dumps(result, indent=1))
        if args.results:
            root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
            write_section(args.results, section(result, root))
            print(f"wrote the PyTorch section of {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
