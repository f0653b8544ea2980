"""Misuses of zenopt.torch, one per case (see bad-use.test); each must fail with a clear
error on every rank, never hang."""
import argparse
import os
import sys

import torch
import torch.nn as nn

import zenopt.torch

sys.path.insert(0, os.path.dirname(__file__))
from models import SmallCNN, TinyTransformer  # noqa: E402

# Plans for a preset: these cases are about misuse, not about the job's profile.
PRESET = "cpu-local"


def example(model_class):
    return model_class.batch(4, torch.Generator().manual_seed(0))


def optimizer_for(model, plan, **options):
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    return zenopt.torch.DistributedOptimizer(sgd, model, plan, **options)


def other_model():
    plan = zenopt.torch.plan(SmallCNN(), example(SmallCNN)[0], cluster=PRESET)
    optimizer_for(TinyTransformer(), plan)


def world_size():
    plan = zenopt.torch.plan(SmallCNN(), example(SmallCNN)[0], dp=zenopt.torch.size() // 2,
                             cluster=PRESET)
    optimizer_for(SmallCNN(), plan)


def missing_parameters():
    model = SmallCNN()
    plan = zenopt.torch.plan(model, example(SmallCNN)[0], cluster=PRESET)
    model.extra = nn.Linear(2, 2)  # added after planning: the plan has no gradient for it
    optimizer_for(model, plan)


def unused_parameters():
    model = SmallCNN()
    model.unused = nn.Linear(2, 2)  # forward never uses it: the export has no such tensor
    zenopt.torch.plan(model, example(SmallCNN)[0], cluster=PRESET)


def accumulate_without_saying():
    model = SmallCNN()
    plan = zenopt.torch.plan(model, example(SmallCNN)[0], cluster=PRESET)
    optimizer = optimizer_for(model, plan)
    inputs, targets = example(SmallCNN)
    for _ in range(2):  # two backward passes before step(), backward_passes_per_step=1
        SmallCNN.loss(model(inputs), targets).backward()
    optimizer.step()


def missing_plan_file():
    model = SmallCNN()
    plan = zenopt.torch.plan(model, example(SmallCNN)[0], cluster=PRESET)
    optimizer_for(model, plan if zenopt.torch.rank() == 0 else "no-such-plan.json")


CASES = {f.__name__.replace("_", "-"): f for f in
         (other_model, world_size, missing_parameters, unused_parameters,
          accumulate_without_saying, missing_plan_file)}

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=sorted(CASES))
    torch.set_num_threads(1)
    CASES[parser.parse_args().case]()
    print(f"rank {zenopt.torch.rank()}: no error")
