"""Train a small CNN on synthetic images with zenopt's planned gradient communication.

    PYTHONPATH=build/python mpirun -np 2 python3 examples/pytorch/train_cnn.py

(as root add --allow-run-as-root --oversubscribe to mpirun). Every rank trains on its own
synthetic batches; zenopt averages the gradients as planned. Rank 0 prints the plan and the
loss, which falls as the model learns the classes.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import zenopt.torch

CLASSES = 10
IMAGE = 32


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class SyntheticImages:
    """Images of CLASSES fixed random patterns plus noise: learnable, and different on every
    rank (seeded by rank) like the shards of a real data set."""

    def __init__(self, batch, rank, noise=1.0):
        patterns = torch.Generator().manual_seed(1234)
        self.templates = torch.randn(CLASSES, 3, IMAGE, IMAGE, generator=patterns)
        self.generator = torch.Generator().manual_seed(1000 + rank)
        self.batch, self.noise = batch, noise

    def next(self):
        labels = torch.randint(0, CLASSES, (self.batch,), generator=self.generator)
        noise = torch.randn(self.batch, 3, IMAGE, IMAGE, generator=self.generator)
        return self.templates[labels] + self.noise * noise, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--compressor", default=None, help="e.g. topk:0.01 or powersgd:4")
    parser.add_argument("--cuda", action="store_true", help="train on GPU rank %% devices")
    args = parser.parse_args()

    rank, size = zenopt.torch.init()
    # One intra-op thread per core and local rank: more would only fight over the cores.
    local_ranks = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_ranks))
    device = torch.device("cuda", rank % torch.cuda.device_count()) if args.cuda else "cpu"
    torch.manual_seed(0)
    model = CNN().to(device)
    data = SyntheticImages(args.batch, rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    # The three lines zenopt adds to a training script:
    plan = zenopt.torch.plan(model, data.next()[0].to(device), strategy=args.strategy,
                             compressor=args.compressor)
    zenopt.torch.broadcast_parameters(model)
    optimizer = zenopt.torch.DistributedOptimizer(optimizer, model, plan)

    if rank == 0:
        print(plan, flush=True)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        images, labels = data.next()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images.to(device)), labels.to(device))
        loss.backward()
        optimizer.step()
        if rank == 0 and (step == 1 or step % 10 == 0):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    if rank == 0:
        elapsed = time.perf_counter() - start
        print(f"{args.steps} steps on {size} ranks: {1000 * elapsed / args.steps:.1f} ms/step")


if __name__ == "__main__":
    main()
