"""Train a small transformer language model on synthetic sequences with zenopt.

    PYTHONPATH=build/python mpirun -np 2 python3 examples/pytorch/train_transformer.py

(as root add --allow-run-as-root --oversubscribe to mpirun). The sequences follow a fixed
random next-token table (with some noise), so the model can learn them; every rank draws its
own. Rank 0 prints the plan and the loss, which falls towards the table's entropy.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import zenopt.torch

VOCAB = 64
SEQUENCE = 32


class TransformerLM(nn.Module):
    def __init__(self, width=64, heads=4, layers=2):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.zeros(SEQUENCE, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, VOCAB)
        # Causal: each position sees itself and the past only.
        self.register_buffer("mask", torch.triu(torch.full((SEQUENCE, SEQUENCE), float("-inf")),
                                                diagonal=1))

    def forward(self, tokens):
        hidden = self.embedding(tokens) + self.position
        return self.head(self.encoder(hidden, mask=self.mask))


class SyntheticText:
    """Sequences where each token is followed by its successor in a fixed random table, or
    (with probability `noise`) by a random token."""

    def __init__(self, batch, rank, noise=0.1):
        self.successor = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(1234))
        self.generator = torch.Generator().manual_seed(2000 + rank)
        self.batch, self.noise = batch, noise

    def next(self):
        tokens = torch.empty(self.batch, SEQUENCE + 1, dtype=torch.long)
        tokens[:, 0] = torch.randint(0, VOCAB, (self.batch,), generator=self.generator)
        for t in range(SEQUENCE):
            random = torch.randint(0, VOCAB, (self.batch,), generator=self.generator)
            keep = torch.rand(self.batch, generator=self.generator) >= self.noise
            tokens[:, t + 1] = torch.where(keep, self.successor[tokens[:, t]], random)
        return tokens[:, :-1], tokens[:, 1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=16, help="sequences per rank and step")
    parser.add_argument("--lr", type=float, default=1e-3)
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
    model = TransformerLM().to(device)
    data = SyntheticText(args.batch, rank)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # The three lines zenopt adds to a training script:
    plan = zenopt.torch.plan(model, data.next()[0].to(device), strategy=args.strategy,
                             compressor=args.compressor)
    zenopt.torch.broadcast_parameters(model)
    optimizer = zenopt.torch.DistributedOptimizer(optimizer, model, plan)

    if rank == 0:
        print(plan, flush=True)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        tokens, targets = data.next()
        optimizer.zero_grad()
        logits = model(tokens.to(device))
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.to(device).reshape(-1))
        loss.backward()
        optimizer.step()
        if rank == 0 and (step == 1 or step % 10 == 0):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    if rank == 0:
        elapsed = time.perf_counter() - start
        print(f"{args.steps} steps on {size} ranks: {1000 * elapsed / args.steps:.1f} ms/step")


if __name__ == "__main__":
    main()
