#!/usr/bin/env python3
"""Writes a small plan file (docs/plan-format.md) for the runtime tests.

Five gradients of awkward sizes (padding, tails, a 1-element tensor) in three
buckets with different chunk counts and streams; every bucket uses the given
compression method and collective sequence, or with comma-separated lists bucket b
uses the b-th entry (the last one repeats).

  make_plan.py --method topk --ranks 4 --sequence all_gather -o plan.json
  make_plan.py --method topk,sign,powersgd --sequence all_gather,all_gather,all_reduce ...
"""
import argparse
import json

SEQUENCES = {
    "all_reduce": ["all_reduce"],
    "rs_ag": ["reduce_scatter", "all_gather"],
    "a2a_ag": ["all_to_all", "all_gather"],
    "broadcast": ["broadcast"],
    "all_gather": ["all_gather"],
}
TENSORS = [("layer4.weight", 3000), ("layer4.bias", 517), ("layer3.weight", 2048),
           ("layer2.bias", 1), ("layer1.weight", 4099)]
BUCKETS = [[0, 1], [2, 3], [4]]  # indices into TENSORS, which is in backward ready order
CHUNKS = [1, 3, 2]
STREAMS = [1, 2, 1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--method", default="none")
    parser.add_argument("--sequence", default="all_reduce")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--ratio", type=float, default=0.1)
    parser.add_argument("--rank", type=int, default=2, help="PowerSGD rank")
    parser.add_argument("--no-error-feedback", action="store_true")
    parser.add_argument("--decoupled", action="store_true")
    parser.add_argument("--task-us", type=float, default=25.0,
                        help="predicted duration of each of the 7 compute tasks")
    parser.add_argument("--task-flops", type=int, default=500000,
                        help="FLOPs of each compute task (zenopt-run --compute gemm runs them)")
    parser.add_argument("--task-bytes", type=int, default=150000,
                        help="bytes read and written by each compute task")
    parser.add_argument("--model", default="handmade")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()

    def per_bucket(text):
        values = text.split(",")
        return [values[min(b, len(values) - 1)] for b in range(len(BUCKETS))]

    methods, sequences = per_bucket(args.method), per_bucket(args.sequence)
    for sequence in sequences:
        if sequence not in SEQUENCES:
            parser.error(f"--sequence: {sequence} is not one of {', '.join(sorted(SEQUENCES))}")

    def compression(method):
        return {
            "method": method,
            "ratio": args.ratio if method in ("topk", "randomk") else 1,
            "rank": args.rank if method == "powersgd" else 0,
            "error_feedback": method != "none" and not args.no_error_feedback,
            "device": "cpu",
        }
    plan = {
        "format_version": 1,
        "generator": {"name": "make_plan.py", "version": "1"},
        "model": {"name": args.model, "hash": ""},
        "cluster": {"name": "cpu-local", "world_size": args.ranks},
        "strategy": "handmade",
        "compressor": args.method,
        "tensors": [{"name": n, "elements": e, "dtype": "f32", "ready_order": i}
                    for i, (n, e) in enumerate(TENSORS)],
        "buckets": [],
        "schedule": [],
        "predictions": {"iteration_us": 0, "compute_us": 0, "exposed_comm_us": 0,
                        "lower_bound_us": 0, "comm_bound_us": 0},
        "baselines": {"nooverlap": 0},
    }
    for b, members in enumerate(BUCKETS):
        offset, entries = 0, []
        for t in members:
            entries.append({"name": TENSORS[t][0], "offset": offset, "elements": TENSORS[t][1]})
            offset += TENSORS[t][1]
        collectives, ops = [], SEQUENCES[sequences[b]]
        for c, op in enumerate(ops):
            last = c == len(ops) - 1
            decoupled = args.decoupled and last and op == "all_gather"
            collectives.append({"op": op, "algorithm": "ring", "chunks": CHUNKS[b],
                                "stream": 3 if decoupled else STREAMS[b], "priority": b,
                                "decoupled": decoupled, "bytes": offset * 4})
        plan["buckets"].append({"id": b, "tensors": entries, "elements": offset,
                                "bytes": offset * 4, "compression": compression(methods[b]),
                                "collectives": collectives})

    schedule, clock = plan["schedule"], [0.0]

    def task(kind, name, bucket, stream, duration, deps, phase, produces=()):
        schedule.append({"id": len(schedule), "kind": kind, "name": name, "bucket": bucket,
                         "stream": stream, "start_us": clock[0], "duration_us": duration,
                         "deps": deps, "phase": phase, "produces": list(produces)})
        if kind == "compute":
            schedule[-1].update(flops=args.task_flops, bytes=args.task_bytes)
            clock[0] += duration
        return len(schedule) - 1

    step = args.task_us
    previous = task("compute", "forward", -1, 0, step, [], "forward")
    deferred = []
    for b, members in enumerate(BUCKETS):
        for t in members:
            previous = task("compute", TENSORS[t][0] + ".backward", -1, 0, step, [previous],
                            "backward", [TENSORS[t][0]])
        dep = previous
        if methods[b] != "none":
            dep = task("compress", f"compress.b{b}", b, 0, 1, [dep], "backward")
        for c, collective in enumerate(plan["buckets"][b]["collectives"]):
            if collective["decoupled"]:
                deferred.append((b, collective, dep))
                continue
            dep = task("collective", f"{collective['op']}.b{b}", b, collective["stream"], 10,
                       [dep], "backward")
        if methods[b] != "none":
            task("decompress", f"decompress.b{b}", b, 0, 1, [dep], "backward")
    optimizer = task("compute", "optimizer", -1, 0, step, [previous], "optimizer")
    for b, collective, dep in deferred:
        task("collective", f"all_gather.b{b}", b, collective["stream"], 10, [dep, optimizer],
             "next_forward")
    compute = clock[0]
    plan["predictions"] = {"iteration_us": compute + 20, "compute_us": compute,
                           "exposed_comm_us": 20, "lower_bound_us": compute, "comm_bound_us": 30}
    plan["baselines"] = {"nooverlap": compute + 30}
    with open(args.output, "w") as out:
        json.dump(plan, out, indent=2)
        out.write("\n")


if __name__ == "__main__":
    main()
