"""Tiny models for the exporter tests (fast on CPU)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, width=16, hidden=32, out=4):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, out)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ConvNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        probs = self.drop(scores.softmax(dim=-1))
        out = (probs @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(out)


class Block(nn.Module):
    """Pre-norm transformer block: attention + MLP + layernorm + dropout."""

    def __init__(self, dim=16, heads=2, dropout=0.1):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(),
                                 nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Embedding, `layers` blocks, final norm and a vocabulary head."""

    def __init__(self, vocab=64, dim=32, heads=4, layers=2, seq=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def lm_loss(vocab, targets):
    return lambda logits: F.cross_entropy(logits.reshape(-1, vocab),
                                          targets.reshape(-1))


class WideMLP(nn.Module):
    """Residual blocks with a wide hidden layer: activations dominate the
    step's memory (the backend tests plan it down to 30%)."""

    def __init__(self, layers=8, dim=16, hidden=256):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.GELU(),
                          nn.Linear(hidden, dim)) for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x
