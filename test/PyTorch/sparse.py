"""Embedding gradients synchronised as row-sparse tensors train exactly (issue 39).

Run under mpirun -np N. A bag-of-tokens classifier whose table is an nn.Embedding with
sparse=True (torch sparse COO gradients) and one with a dense embedding (dense gradients,
synchronised by their non-zero rows) train 10 SGD steps with every scheme of
zen/SparseScheme.h. Each run must end
- bit-identical on every rank,
- bit-identical to every other scheme's run (each sums exactly, in rank order),
- within 1e-5 of single-process training on the concatenated batch,
and the check is sharp (training on the local batch alone ends far outside it). Every third
step leaves the table unused, so it gets no gradient on any rank, which must not fail.

The plans: each scheme in turn is forced on the table (a twin model without it planned by
zenopt, the table added as the plan's `sparse_tensors` entry, as the planner writes it:
docs/plan-format.md); then zenopt plans the whole model itself, with the table's statistics
measured from the first steps (plan's sparsity_batches).
"""
import copy
import hashlib
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import zenopt.torch
from zenopt import runtime

STEPS = 10
LOCAL_BATCH = 4
LR = 0.1
TOLERANCE = 1e-5
VOCAB, DIM, LOOKUPS, CLASSES = 300, 8, 6, 4
SCHEMES = [("dense", {}), ("agsparse", {}), ("sparcml", {"dense_threshold": 0.25}),
           ("sparcml", {"dense_threshold": 1.0}), ("omnireduce", {"block_rows": 16}),
           ("balanced", {}), ("hierarchical", {})]


class Dense(nn.Module):
    """The layers after the table (planned by zenopt)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM, 16)
        self.fc2 = nn.Linear(16, CLASSES)

    def forward(self, features):
        return self.fc2(F.relu(self.fc1(features)))


class BagOfTokens(Dense):
    def __init__(self, sparse):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM, sparse=sparse)
        self.use_table = True

    def forward(self, tokens):
        # Without the table (every third step) the features are constant: the table gets
        # no gradient on any rank.
        features = (self.embedding(tokens).mean(1) if self.use_table
                    else torch.ones(tokens.shape[0], DIM))
        return super().forward(features)


def batches(ranks):
    generator = torch.Generator().manual_seed(5)
    out = []
    for _ in range(STEPS):
        # Zipf-like: small token ids are frequent, so ranks touch overlapping rows.
        tokens = (torch.rand(LOCAL_BATCH * ranks, LOOKUPS, generator=generator) ** 3 *
                  VOCAB).long()
        out.append((tokens, torch.randint(0, CLASSES, (LOCAL_BATCH * ranks,),
                                          generator=generator)))
    return out


def local_part(batch, rank):
    rows = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
    return tuple(part[rows] for part in batch)


def train(model, data, optimizer, skip_table=True):
    for step, (tokens, targets) in enumerate(data):
        optimizer.zero_grad(set_to_none=True)
        model.use_table = not skip_table or step % 3 != 2
        F.cross_entropy(model(tokens), targets).backward()
        optimizer.step()


def digest(model):
    hasher = hashlib.blake2b(digest_size=8)
    for tensor in model.state_dict().values():
        hasher.update(tensor.detach().contiguous().numpy().tobytes())
    return int.from_bytes(hasher.digest(), "little")


def max_difference(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def sparse_plan(dense_plan, scheme, parameters, size, path):
    """The dense layers' plan with the table as a sparse tensor under `scheme`."""
    with open(dense_plan) as file:
        plan = json.load(file)
    powers = size.bit_length()  # 1, 2, 4, ... up to the world size
    plan["sparse_tensors"] = [dict({
        "name": "embedding.weight", "rows": VOCAB, "row_elements": DIM, "scheme": scheme},
        **parameters, statistics={"density": LOCAL_BATCH * LOOKUPS / VOCAB,
                                  "gamma": [1.0] * powers, "skew": 0.5, "source": "model"},
        predicted_us=0.0)]
    with open(path, "w") as file:
        json.dump(plan, file)
    return path


def main():
    torch.set_num_threads(1)
    rank, size = zenopt.torch.init()
    # Nodes of two ranks for the hierarchical scheme (all ranks share one machine here).
    if size % 2 == 0:
        os.environ["ZENRT_RANKS_PER_NODE"] = "2"
    data = batches(size)
    dense_plan = zenopt.torch.plan(Dense(), torch.randn(LOCAL_BATCH, DIM), strategy="ddp",
                                   cluster="cpu-local")
    scratch = os.path.dirname(dense_plan.path)
    for sparse in (True, False):
        torch.manual_seed(3)
        initial = BagOfTokens(sparse)
        reference = copy.deepcopy(initial)
        train(reference, data, torch.optim.SGD(reference.parameters(), lr=LR, momentum=0.9))
        local_only = copy.deepcopy(initial)
        train(local_only, [local_part(b, rank) for b in data],
              torch.optim.SGD(local_only.parameters(), lr=LR, momentum=0.9))
        sharpness = max_difference(local_only, reference)
        first = None
        for scheme, parameters in SCHEMES:
            label = f"{'sparse' if sparse else 'dense'} embedding, {scheme} {parameters or ''}"
            model = copy.deepcopy(initial)
            plan = sparse_plan(dense_plan.path, scheme, parameters, size,
                               os.path.join(scratch, f"sparse.{rank}.json"))
            optimizer = zenopt.torch.DistributedOptimizer(
                torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9), model, plan)
            train(model, [local_part(b, rank) for b in data], optimizer)
            optimizer.close()
            if sparse:
                assert model.embedding.weight.grad is None or \
                    model.embedding.weight.grad.is_sparse, f"{label}: the gradient went dense"
            error = max_difference(model, reference)
            digests = runtime.world_exchange(digest(model), size)
            if rank == 0:
                print(f"{label}: max |zenopt - single process| = {error:.2e} (tolerance "
                      f"{TOLERANCE:.0e}); local batch alone {sharpness:.2e}; "
                      f"{len(set(digests))} distinct result(s) over {size} ranks", flush=True)
            assert len(set(digests)) == 1, f"{label}: ranks differ: {digests}"
            assert error <= TOLERANCE, f"rank {rank}: {label}: parameters differ by {error:.3e}"
            if first is None:
                first = (label, model)
            assert digest(model) == digest(first[1]), \
                f"{label} differs from {first[0]} (every scheme sums exactly)"
        # zenopt's own plan of the whole model: the table is a sparse tensor, its statistics
        # measured from the first steps' lookups (plan's sparsity_batches, as Zen measures).
        model = copy.deepcopy(initial)
        planned = zenopt.torch.plan(model, local_part(data[0], rank)[0], strategy="ddp",
                                    cluster="cpu-local",
                                    sparsity_batches=[local_part(b, rank)[0] for b in data])
        with open(planned.path) as file:
            tables = json.load(file).get("sparse_tensors", [])
        assert [(t["name"], t["statistics"]["source"]) for t in tables] == \
            [("embedding.weight", "measured")], f"zenopt's plan: {tables}"
        optimizer = zenopt.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9), model, planned)
        train(model, [local_part(b, rank) for b in data], optimizer)
        optimizer.close()
        error = max_difference(model, reference)
        if rank == 0:
            print(f"{'sparse' if sparse else 'dense'} embedding, zenopt's plan "
                  f"({tables[0]['scheme']}, density {tables[0]['statistics']['density']:.3f} "
                  f"measured): max |zenopt - single process| = {error:.2e}", flush=True)
        assert error <= TOLERANCE, f"rank {rank}: zenopt's plan: parameters differ by {error:.3e}"
        assert sharpness > 100 * TOLERANCE, "the check is not sharp"
    if rank == 0:
        print(f"sparse: ok on {size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
