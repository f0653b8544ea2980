"""Small models and synthetic data shared by the zenopt.torch tests (no BatchNorm: its batch
statistics would make per-rank training differ from training on the concatenated batch)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))

    @staticmethod
    def batch(samples, generator):
        """(inputs, targets): 16x16 images and class labels."""
        return (torch.randn(samples, 3, 16, 16, generator=generator),
                torch.randint(0, 10, (samples,), generator=generator))

    @staticmethod
    def loss(outputs, targets):
        return F.cross_entropy(outputs, targets)


class TinyTransformer(nn.Module):
    """A causal language model; its mask is a float buffer, which the export writes as an
    initializer like the parameters."""
    VOCAB = 32
    SEQUENCE = 8

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(self.VOCAB, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, self.VOCAB)
        self.register_buffer("mask", torch.triu(
            torch.full((self.SEQUENCE, self.SEQUENCE), float("-inf")), diagonal=1))

    def forward(self, tokens):
        return self.head(self.encoder(self.embedding(tokens), src_mask=self.mask))

    @staticmethod
    def batch(samples, generator):
        """(tokens, next tokens)."""
        tokens = torch.randint(0, TinyTransformer.VOCAB, (samples, TinyTransformer.SEQUENCE + 1),
                               generator=generator)
        return tokens[:, :-1], tokens[:, 1:]

    @staticmethod
    def loss(outputs, targets):
        return F.cross_entropy(outputs.reshape(-1, TinyTransformer.VOCAB), targets.reshape(-1))


MODELS = {"cnn": SmallCNN, "transformer": TinyTransformer}
