"""The GPT-style decoder of --workload gpt, from torch.nn alone (common/workloads/gpt.py).

    model = GPT(vocab=50_304, seq_len=1024, width=768, layers=12, heads=12)   # GPT-2 small
    logits = model(token_ids)        # (batch, seq_len) -> (batch, seq_len, vocab)

As GPT-2 (and nanoGPT): token and learned position embeddings; pre-LayerNorm blocks, each a
causal self-attention (torch's scaled_dot_product_attention with is_causal=True, which picks
a flash or memory-efficient kernel where it can) and a 4x MLP with GELU (tanh form, GPT-2's);
a final LayerNorm; an LM head without bias whose weight is the token embedding's (tied).
Every Linear and Embedding weight is drawn from normal(0, 0.02), biases start at zero,
LayerNorms at 1 and 0, in module order from the seed the runner set. No dropout: a
benchmark's steps should all do the same work.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention over earlier positions only."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, tokens, width) -> the same shape."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attention(ln(x)), then x + MLP(ln(x))."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, tokens, width) -> the same shape."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token ids in, next-token logits out."""

    def __init__(self, vocab: int, seq_len: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        # Made without memory, then allocated and initialised once each (on the CPU): torch's
        # default initialisation, overwritten below, would double the seconds GPT-2 small
        # takes to build (every run pays them, a forked one too).
        with torch.device("meta"):
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(seq_len, width)
            self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)
        self.to_empty(device="cpu")
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2: one matrix, counted once
        for module in self.modules():
            if module is not self.lm_head:  # its weight is the token embedding's, drawn once
                _init(module)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(batch, tokens) ids -> (batch, tokens, vocab) logits."""
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _init(module: nn.Module) -> None:
    """GPT-2's initialisation: weights normal(0, 0.02), biases zero, LayerNorm 1 and 0."""
    with torch.no_grad():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
