"""Compressed plans still train, and only thanks to error feedback.

Run under mpirun -np N. For topk:0.01 and powersgd:4 on every bucket (--strategy ddp with the
compressor), an MLP learns a synthetic classification task: the loss on a fixed evaluation set
falls below half its start within STEPS steps. The same run with error feedback switched off
in the plan file ends measurably worse (at least WORSE times the loss), which shows that the
residuals the runtime keeps across steps are live.
"""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import zenopt.torch

STEPS = 15
LR = 0.5
WORSE = 3.0
FEATURES, CLASSES = 32, 8


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 64)
        self.fc2 = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Task:
    """Noisy copies of CLASSES fixed random vectors; each rank draws its own samples."""

    def __init__(self):
        self.templates = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(5))

    def batch(self, samples, generator):
        labels = torch.randint(0, CLASSES, (samples,), generator=generator)
        noise = torch.randn(samples, FEATURES, generator=generator)
        return self.templates[labels] + 0.5 * noise, labels


def without_error_feedback(plan):
    """A copy of the plan file with error feedback off in every bucket."""
    with open(plan.path) as file:
        plan_json = json.load(file)
    for bucket in plan_json["buckets"]:
        bucket["compression"]["error_feedback"] = False
    path = plan.path + ".no-error-feedback.json"
    with open(path, "w") as file:
        json.dump(plan_json, file, indent=2)
    return path


def train(task, plan_path, rank, evaluation):
    torch.manual_seed(3)
    model = MLP()
    optimizer = zenopt.torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=LR), model, plan_path)
    generator = torch.Generator().manual_seed(100 + rank)

    def evaluation_loss():
        with torch.no_grad():
            return F.cross_entropy(model(evaluation[0]), evaluation[1]).item()

    start = evaluation_loss()
    for _ in range(STEPS):
        inputs, labels = task.batch(32, generator)
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    optimizer.close()
    return start, evaluation_loss()


def check(compressor, task, rank, size):
    torch.manual_seed(3)
    plan = zenopt.torch.plan(MLP(), task.batch(32, torch.Generator().manual_seed(0))[0],
                             strategy="ddp", compressor=compressor,
                             cluster="cpu-local")
    with open(plan.path) as file:
        methods = {b["compression"]["method"] for b in json.load(file)["buckets"]}
    assert methods == {compressor.split(":")[0]}, f"{compressor}: the plan compresses {methods}"
    evaluation = task.batch(512, torch.Generator().manual_seed(999))
    start, with_feedback = train(task, plan.path, rank, evaluation)
    _, without_feedback = train(task, without_error_feedback(plan), rank, evaluation)
    if rank == 0:
        print(f"{compressor}: loss {start:.3f} -> {with_feedback:.3f} in {STEPS} steps with error "
              f"feedback, {without_feedback:.3f} without ({without_feedback / with_feedback:.1f}x)",
              flush=True)
    assert with_feedback < start / 2, f"{compressor}: loss {with_feedback} is not below half " \
                                      f"of {start} after {STEPS} steps"
    assert without_feedback > WORSE * with_feedback, \
        f"{compressor}: without error feedback the loss is {without_feedback}, not worse than " \
        f"{WORSE} x {with_feedback}"


def main():
    torch.set_num_threads(1)
    rank, size = zenopt.torch.init()
    task = Task()
    for compressor in ("topk:0.01", "powersgd:4"):
        check(compressor, task, rank, size)
    if rank == 0:
        print(f"compressed: ok on {size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
