"""Exports embedding models to ONNX for training and writes which gradients are row-sparse.

usage: export_sparse.py OUT_DIR

Each NAME.onnx is exported as export_models.py does (training=TRAINING,
do_constant_folding=False); NAME.sparse.json holds the truth taken from the modules: every
nn.Embedding / nn.EmbeddingBag whose weight is used only by its own lookup, with its rows,
row elements and lookups per sample (from the index input the model is called with), and the
tables that are also used densely (a tied output projection). Runs under Debian's python3
with python3-torch; nothing is downloaded.
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_models import Bag, Llama, TiedGPT  # noqa: E402

torch.manual_seed(0)


class EmbeddingMLP(nn.Module):
    """A 200 000 x 64 table looked up 16 times per sample, then a small MLP."""

    def __init__(self, rows=200000, dim=64, lookups=16):
        super().__init__()
        self.embedding = nn.Embedding(rows, dim)
        self.fc1 = nn.Linear(lookups * dim, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, ids):
        return self.fc2(torch.relu(self.fc1(self.embedding(ids).flatten(1))))


class FixedBags(nn.Module):
    """DLRM-style: two EmbeddingBag tables with fixed-length bags (2-D input, no offsets)."""

    def __init__(self):
        super().__init__()
        self.users = nn.EmbeddingBag(5000, 16, mode="sum")
        self.items = nn.EmbeddingBag(3000, 16, mode="mean")
        self.top = nn.Linear(32, 1)

    def forward(self, user_ids, item_ids):
        return self.top(torch.cat([self.users(user_ids), self.items(item_ids)], dim=1))


def table(name, module, lookups):
    return {"name": name + ".weight", "rows": module.weight.shape[0],
            "row_elements": module.weight.shape[1], "lookups_per_sample": lookups}


def models():
    bag = Bag()
    fixed = FixedBags()
    gpt = TiedGPT()
    mlp = EmbeddingMLP()
    llama = Llama(vocab=32000)
    return {
        # (model, inputs, sparse truth, tables that stay dense)
        "embedding_mlp": (mlp, (torch.randint(0, 200000, (32, 16)),),
                          [table("embedding", mlp.embedding, 16)], []),
        # The exporter takes the first input's 40 ids for the batch: 1 lookup per "sample".
        "embedding_bag": (bag, (torch.randint(0, 1000, (40,)), torch.tensor([0, 10, 25, 31])),
                          [table("bag", bag.bag, 1)], []),
        "fixed_bags": (fixed, (torch.randint(0, 5000, (8, 20)), torch.randint(0, 3000, (8, 5))),
                       [table("users", fixed.users, 20), table("items", fixed.items, 5)], []),
        # wte is also the head's weight: dense. wpe is looked up by the 32 position ids.
        "gpt_tied": (gpt, (torch.randint(0, 320, (2, 32)),),
                     [table("wpe", gpt.wpe, 32)], ["wte.weight"]),
        # A Llama decoder with a 32 000-token vocabulary and an untied head: its token table is
        # row-sparse, looked up by the 32 ids of each sample.
        "llama_vocab": (llama, (torch.randint(0, 32000, (2, 32)),),
                        [table("embed_tokens", llama.embed_tokens, 32)], []),
    }


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (model, inputs, sparse, dense) in models().items():
        model.train()
        torch.onnx.export(model, inputs, os.path.join(out, name + ".onnx"),
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=14)
        with open(os.path.join(out, name + ".sparse.json"), "w") as f:
            json.dump({"sparse_gradients": sparse, "dense": dense}, f, indent=1)


if __name__ == "__main__":
    main()
