"""Exports small PyTorch models to ONNX for training, as users do, and writes their truth.

usage: export_models.py OUT_DIR [NAME ...]

Each NAME.onnx is exported with torch.onnx.export(training=TRAINING, do_constant_folding=False)
and described in NAME.truth.json: the trainable parameters (names, tensors, elements: what
sum(p.numel() for p in model.parameters()) says, shared tensors counted once), the buffers,
and the transformer configuration the module was built with (absent for non-transformers).
Runs under Debian's python3 with python3-torch; nothing is downloaded.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def register_rotary_and_mask(module, head_dim, seq):
    """The buffers of a rotary decoder: cos/sin tables [1, 1, seq, head_dim] and an additive causal mask."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    module.register_buffer("cos_cached", angles.cos()[None, None])
    module.register_buffer("sin_cached", angles.sin()[None, None])
    module.register_buffer("causal_mask", torch.full((seq, seq), float("-inf")).triu(1))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask
        out = F.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class SwiGLU(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = LlamaAttention(hidden, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = SwiGLU(hidden, ffn)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """Llama-2-style decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU."""

    def __init__(self, vocab=256, hidden=128, heads=8, kv_heads=2, ffn=352, layers=2, seq=32):
        super().__init__()
        self.config = dict(blocks=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                           vocab=vocab, seq=seq, mlp="swiglu", norm="rmsnorm",
                           tied_embeddings=False, positions="rotary", moe_blocks=0)
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        register_rotary_and_mask(self, hidden // heads, seq)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, self.cos_cached, self.sin_cached, self.causal_mask)
        return self.lm_head(self.norm(x))


class LlamaComputedRotary(Llama):
    """Llama as recent Hugging Face code writes it: only inv_freq is a buffer; cos and sin are
    computed in forward from it and the positions (scaled by attention_scaling)."""

    def __init__(self):
        super().__init__()
        del self._buffers["cos_cached"], self._buffers["sin_cached"]
        head_dim = self.config["hidden"] // self.config["heads"]
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)))
        self.attention_scaling = 1.0

    def forward(self, ids):
        b, s = ids.shape
        positions = torch.arange(s, device=ids.device)[None].expand(b, -1)
        freqs = (self.inv_freq[None, :, None].expand(b, -1, 1) @ positions[:, None, :].float()).transpose(1, 2)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = (angles.cos() * self.attention_scaling)[:, None]
        sin = (angles.sin() * self.attention_scaling)[:, None]
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, self.causal_mask[:s, :s])
        return self.lm_head(self.norm(x))


class Encoder(nn.Module):
    """nn.TransformerEncoder with 16 heads of 16, token and learned position embeddings."""

    def __init__(self, vocab=512, hidden=256, heads=16, ffn=512, layers=2, seq=32, norm_first=False):
        super().__init__()
        self.config = dict(blocks=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=ffn,
                           vocab=vocab, seq=seq, mlp="relu", norm="layernorm",
                           tied_embeddings=False, positions="learned", moe_blocks=0)
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.zeros(1, seq, hidden))
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.1, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        return self.head(self.encoder(self.tokens(ids) + self.positions))


class TiedGPT(nn.Module):
    """GPT-2-like: fused QKV, learned positions, GELU MLP, a causal-mask buffer, tied head."""

    def __init__(self, vocab=320, hidden=128, heads=4, layers=2, seq=32):
        super().__init__()
        self.config = dict(blocks=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=4 * hidden,
                           vocab=vocab, seq=seq, mlp="gelu", norm="layernorm",
                           tied_embeddings=True, positions="learned", moe_blocks=0)
        self.heads = heads
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            block = nn.Module()
            block.ln_1 = nn.LayerNorm(hidden)
            block.c_attn = nn.Linear(hidden, 3 * hidden)
            block.c_proj = nn.Linear(hidden, hidden)
            block.ln_2 = nn.LayerNorm(hidden)
            block.c_fc = nn.Linear(hidden, 4 * hidden)
            block.mlp_proj = nn.Linear(4 * hidden, hidden)
            self.blocks.append(block)
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))
        self.register_buffer("position_ids", torch.arange(seq)[None])

    def forward(self, ids):
        b, s = ids.shape
        x = self.wte(ids) + self.wpe(self.position_ids)
        h = x.shape[-1]
        for block in self.blocks:
            q, k, v = block.c_attn(block.ln_1(x)).split(h, dim=2)
            q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(h // self.heads)
            scores = scores.masked_fill(self.bias[:, :, :s, :s] == 0, float("-inf"))
            attn = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
            x = x + block.c_proj(attn)
            x = x + block.mlp_proj(F.gelu(block.c_fc(block.ln_2(x))))
        return self.lm_head(self.ln_f(x))


class NeoXBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.input_layernorm = nn.LayerNorm(hidden)
        self.post_attention_layernorm = nn.LayerNorm(hidden)
        self.query_key_value = nn.Linear(hidden, 3 * hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.dense_h_to_4h = nn.Linear(hidden, 4 * hidden)
        self.dense_4h_to_h = nn.Linear(4 * hidden, hidden)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        qkv = self.query_key_value(self.input_layernorm(x)).view(b, s, self.heads, 3 * self.head_dim)
        q, k, v = (t.transpose(1, 2) for t in qkv.split(self.head_dim, dim=-1))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask
        attn = self.dense((F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, h))
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        return x + attn + mlp  # parallel residual: both branches read the block's input


class NeoX(nn.Module):
    """GPT-NeoX-like: parallel residual, fused QKV split per head, rotary positions, untied head."""

    def __init__(self, vocab=300, hidden=128, heads=8, layers=2, seq=32):
        super().__init__()
        self.config = dict(blocks=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=4 * hidden,
                           vocab=vocab, seq=seq, mlp="gelu", norm="layernorm",
                           tied_embeddings=False, positions="rotary", moe_blocks=0)
        self.embed_in = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(NeoXBlock(hidden, heads) for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(hidden)
        self.embed_out = nn.Linear(hidden, vocab, bias=False)
        register_rotary_and_mask(self, hidden // heads, seq)

    def forward(self, ids):
        x = self.embed_in(ids)
        for layer in self.layers:
            x = layer(x, self.cos_cached, self.sin_cached, self.causal_mask)
        return self.embed_out(self.final_layer_norm(x))


class Bag(nn.Module):
    """nn.EmbeddingBag (mean over bags given by offsets) then a classifier."""

    def __init__(self, rows=1000, dim=32, classes=10):
        super().__init__()
        self.bag = nn.EmbeddingBag(rows, dim, mode="mean")
        self.fc = nn.Linear(dim, classes)

    def forward(self, ids, offsets):
        return self.fc(self.bag(ids, offsets))


class BatchNormCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class T5Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, memory=None, mask=None):
        memory = x if memory is None else memory
        b, s, _ = x.shape
        t = memory.shape[1]
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(memory).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(memory).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores + mask
        out = F.softmax(scores, dim=-1) @ v
        return self.o(out.transpose(1, 2).reshape(b, s, -1))


class T5Block(nn.Module):
    def __init__(self, hidden, heads, ffn, cross):
        super().__init__()
        self.norm1 = RMSNorm(hidden)
        self.attn = T5Attention(hidden, heads)
        self.cross = cross
        if cross:
            self.norm_cross = RMSNorm(hidden)
            self.cross_attn = T5Attention(hidden, heads)
        self.norm2 = RMSNorm(hidden)
        self.wi = nn.Linear(hidden, ffn, bias=False)
        self.wo = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, memory=None, mask=None):
        x = x + self.attn(self.norm1(x), mask=mask)
        if self.cross:
            x = x + self.cross_attn(self.norm_cross(x), memory)
        return x + self.wo(F.relu(self.wi(self.norm2(x))))


class T5Like(nn.Module):
    """A small T5-like encoder-decoder: shared tied embedding, RMSNorm, ReLU MLP, cross-attention."""

    def __init__(self, vocab=256, hidden=128, heads=4, ffn=256, layers=2, seq=16):
        super().__init__()
        self.config = dict(blocks=2 * layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=ffn,
                           vocab=vocab, seq=seq, mlp="relu", norm="rmsnorm",
                           tied_embeddings=True, positions="none", moe_blocks=0)
        self.shared = nn.Embedding(vocab, hidden)
        self.encoder = nn.ModuleList(T5Block(hidden, heads, ffn, False) for _ in range(layers))
        self.encoder_norm = RMSNorm(hidden)
        self.decoder = nn.ModuleList(T5Block(hidden, heads, ffn, True) for _ in range(layers))
        self.decoder_norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.shared.weight
        self.register_buffer("causal_mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, source, target):
        memory = self.shared(source)
        for block in self.encoder:
            memory = block(memory)
        memory = self.encoder_norm(memory)
        x = self.shared(target)
        for block in self.decoder:
            x = block(x, memory, self.causal_mask)
        return self.lm_head(self.decoder_norm(x))


class TorchTransformer(nn.Module):
    """nn.Transformer (encoder-decoder; its cross-attention slices Q and K/V out of one in_proj)."""

    def __init__(self, vocab=100, hidden=64, heads=4, ffn=128, layers=2, seq=16):
        super().__init__()
        self.config = dict(blocks=2 * layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=ffn,
                           vocab=vocab, seq=seq, mlp="relu", norm="layernorm",
                           tied_embeddings=False, positions="none", moe_blocks=0)
        self.embedding = nn.Embedding(vocab, hidden)
        self.transformer = nn.Transformer(hidden, heads, layers, layers, ffn, dropout=0.1,
                                          batch_first=True)
        self.head = nn.Linear(hidden, vocab)
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, source, target):
        out = self.transformer(self.embedding(source), self.embedding(target), tgt_mask=self.causal_mask)
        return self.head(out)


def models():
    ids = torch.randint(0, 256, (2, 32))
    return {
        "llama_gqa": (Llama(), (ids,), 17),
        "llama_inv_freq": (LlamaComputedRotary(), (ids,), 17),
        "encoder_h16": (Encoder(), (torch.randint(0, 512, (2, 32)),), 17),
        "encoder_h16_opset14": (Encoder(norm_first=True), (torch.randint(0, 512, (2, 32)),), 14),
        "gpt_tied": (TiedGPT(), (torch.randint(0, 320, (2, 32)),), 14),
        "neox_parallel": (NeoX(), (torch.randint(0, 300, (2, 32)),), 17),
        "embedding_bag": (Bag(), (torch.randint(0, 1000, (40,)), torch.tensor([0, 10, 25, 31])), 14),
        "bn_cnn": (BatchNormCNN(), (torch.randn(4, 3, 16, 16),), 14),
        "t5_like": (T5Like(), (torch.randint(0, 256, (2, 16)), torch.randint(0, 256, (2, 16))), 17),
        "torch_transformer": (TorchTransformer(),
                              (torch.randint(0, 100, (2, 16)), torch.randint(0, 100, (2, 16))), 17),
    }


def truth(model):
    params = dict(model.named_parameters())  # shared tensors appear once
    return {
        "tensors": len(params),
        "elements": sum(p.numel() for p in params.values()),
        "parameters": sorted(params),
        "buffers": sorted(name for name, _ in model.named_buffers()),
        "transformer": getattr(model, "config", None),
    }


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    wanted = set(sys.argv[2:])
    for name, (model, inputs, opset) in models().items():
        if wanted and name not in wanted:
            continue
        model.train()
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(model, inputs, path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=opset)
        with open(os.path.join(out, name + ".truth.json"), "w") as f:
            json.dump(truth(model), f, indent=1, sort_keys=True)
    # An inference export of the same CNN: BatchNorm folded, parameters renamed onnx::Conv_NN.
    if not wanted or "bn_cnn_eval" in wanted:
        model = BatchNormCNN().eval()
        torch.onnx.export(model, (torch.randn(4, 3, 16, 16),), os.path.join(out, "bn_cnn_eval.onnx"),
                          opset_version=14)


if __name__ == "__main__":
    main()
