"""Uncompressed plans train exactly: after 10 SGD steps on every rank's own batch, zenopt's
parameters equal single-process training on the concatenated batch, to fp32 rounding.

Run under mpirun -np N. Checks a CNN and a transformer with --strategy auto, ddp, wfbp and
manual buckets, gradient accumulation (two backward passes per step) and frozen parameters. Fails (non-zero
exit) unless every rank matches; also asserts that the comparison is sharp: training on the
local batch alone ends far outside the tolerance. Ranks other than 0 start from other
parameters, which broadcast_parameters replaces with rank 0's. With --cuda the models train on GPU
rank % devices (libzenrt's device for the rank, NCCL); exit code 77 (skip) without one.
"""
import argparse
import copy
import os
import sys

import torch

import zenopt.torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from models import MODELS  # noqa: E402

STEPS = 10
LOCAL_BATCH = 4
LR = 0.1
# fp32 rounding: the ranks' gradient averages are summed in another order than the single
# process' batch mean, and ten steps compound it (measured: about 1e-7).
TOLERANCE = 5e-6


def global_batches(model_class, ranks, seed, device):
    """The STEPS concatenated batches: rank r's samples are rows r*LOCAL_BATCH onwards."""
    generator = torch.Generator().manual_seed(seed)
    batches = [model_class.batch(LOCAL_BATCH * ranks, generator) for _ in range(STEPS)]
    return [tuple(part.to(device) for part in batch) for batch in batches]


def local_part(batch, rank):
    rows = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
    return tuple(part[rows] for part in batch)


def train_single_process(model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    for inputs, targets in batches:
        optimizer.zero_grad()
        type(model).loss(model(inputs), targets).backward()
        optimizer.step()


def train_with_zenopt(model, batches, rank, plan, passes):
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    optimizer = zenopt.torch.DistributedOptimizer(optimizer, model, plan,
                                                  backward_passes_per_step=passes)
    for batch in batches:
        inputs, targets = local_part(batch, rank)
        optimizer.zero_grad()
        # Gradient accumulation: `passes` micro-batches, each loss scaled to the batch mean.
        for micro_inputs, micro_targets in zip(inputs.chunk(passes), targets.chunk(passes)):
            (type(model).loss(model(micro_inputs), micro_targets) / passes).backward()
        optimizer.step()
    optimizer.close()


def max_difference(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def check(name, strategy, buckets, passes, frozen, rank, size, device):
    model_class = MODELS[name]
    torch.manual_seed(7)
    initial = model_class().to(device)
    for parameter_name in frozen:
        initial.get_parameter(parameter_name).requires_grad_(False)
    batches = global_batches(model_class, size, seed=11, device=device)
    reference = copy.deepcopy(initial)
    train_single_process(reference, batches)
    local_only = copy.deepcopy(initial)
    train_single_process(local_only, [local_part(batch, rank) for batch in batches])

    distributed = copy.deepcopy(initial)
    if rank != 0:  # only broadcast_parameters gives every rank rank 0's start
        with torch.no_grad():
            for tensor in distributed.state_dict().values():
                tensor.add_(1.0)
    zenopt.torch.broadcast_parameters(distributed)
    # A preset: the plan's prices do not matter to exactness (own-profile.test plans from
    # the job's profile).
    options = {"strategy": strategy, "buckets": buckets, "cluster": "cpu-local"}
    plan = zenopt.torch.plan(distributed, local_part(batches[0], rank)[0], **options)
    train_with_zenopt(distributed, batches, rank, plan, passes)

    error = max_difference(distributed, reference)
    sharpness = max_difference(local_only, reference)
    label = f"{name} {strategy}{' ' + str(buckets) if buckets else ''}" \
            f"{f' ({passes} backward passes per step)' if passes > 1 else ''}" \
            f"{f' (frozen: {frozen})' if frozen else ''}"
    if rank == 0:
        print(f"exact {label}: {plan.summary['buckets']} buckets; max |zenopt - single "
              f"process| = {error:.2e} (tolerance {TOLERANCE:.0e}); local batch alone "
              f"{sharpness:.2e}", flush=True)
    assert sharpness > 100 * TOLERANCE, f"{label}: the check is not sharp"
    assert error <= TOLERANCE, f"rank {rank}: {label}: parameters differ by {error:.3e}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank, size = zenopt.torch.init()
    if args.cuda and not torch.cuda.is_available():
        print("skipped: no CUDA device (or PyTorch built without CUDA)")
        return 77
    device = torch.device("cuda", rank % torch.cuda.device_count()) if args.cuda else "cpu"
    torch.backends.cudnn.deterministic = True  # the reference must not vary run to run
    # (model, strategy, manual buckets, backward passes per step, frozen parameters)
    cases = [("cnn", "auto", None, 1, []), ("cnn", "ddp", None, 1, []),
             ("cnn", "wfbp", None, 1, []), ("cnn", "manual", [2, 3, 1], 1, []),
             ("cnn", "auto", None, 2, []), ("cnn", "auto", None, 1, ["conv1.weight"]),
             ("transformer", "auto", None, 1, []), ("transformer", "ddp", None, 1, []),
             ("transformer", "wfbp", None, 1, []), ("transformer", "manual", [4, 6, 4], 1, [])]
    for case in cases:
        check(*case, rank, size, device)
    if rank == 0:
        print(f"exact: ok on {size} ranks ({device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
