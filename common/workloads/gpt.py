"""--workload gpt: a GPT-style decoder from torch.nn alone, on random token ids.

    python -m native --workload gpt --precision bf16 --batch-size-per-device 8
    python -m native --workload gpt --gpt-preset tiny --accelerator cpu --steps 3

The model is common/workloads/gpt_model.py: token and learned position embeddings, pre-LayerNorm
blocks of causal self-attention (scaled_dot_product_attention) and a 4x GELU MLP, a final
LayerNorm and an LM head tied to the token embedding, as GPT-2. No download, no transformers.
A sample is a sequence of --gpt-seq-len tokens; throughput counts tokens. Each rank's batch is
random token ids made on its device from --seed + rank; the targets are the next tokens.

`--gpt-preset` gives the sizes (gpt2-small by default: 124M parameters); each size option
given overrides its preset value. This module imports no torch: the parser reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from common.errors import UsageError
from common.option_fields import Group, option
from common.workloads import Batch, Workload

# name -> (layers, width, heads, sequence length, vocabulary). gpt2-small is GPT-2's 124M model
# with the vocabulary padded from 50,257 to 50,304 (a multiple of 64), as nanoGPT does.
PRESETS = {
    "gpt2-small": (12, 768, 12, 1024, 50_304),
    "tiny": (2, 64, 4, 64, 512),  # for CPU tests: a step takes milliseconds
}
SIZES = ("gpt_layers", "gpt_width", "gpt_heads", "gpt_seq_len", "gpt_vocab")
# Bounds that no single GPU's run exceeds; beyond them a run would only fail in every rank.
MAX_LAYERS = 1_000
MAX_WIDTH = 65_536
MAX_SEQ_LEN = 1_048_576
MAX_VOCAB = 16_777_216

GPT = Group("workload: gpt", "with --workload gpt; each size given overrides --gpt-preset's")


@dataclass(frozen=True)
class GptOptions:
    """The gpt workload's options; the sizes are None until the preset fills them (check)."""

    gpt_preset: str = option(
        "gpt2-small",
        GPT,
        "sizes: gpt2-small (12 layers x 768, 12 heads, sequence 1024, vocabulary 50,304)"
        " or tiny (2 x 64, 4 heads, sequence 64, vocabulary 512: CPU tests)",
        choices=tuple(PRESETS),
    )
    gpt_layers: int | None = option(
        None,
        GPT,
        "transformer blocks (default: the preset's)",
        metavar="N",
        at_least="positive",
        at_most=MAX_LAYERS,
    )
    gpt_width: int | None = option(
        None,
        GPT,
        "model width, a multiple of --gpt-heads (default: the preset's)",
        metavar="N",
        at_least="positive",
        at_most=MAX_WIDTH,
    )
    gpt_heads: int | None = option(
        None,
        GPT,
        "attention heads (default: the preset's)",
        metavar="N",
        at_least="positive",
        at_most=MAX_WIDTH,
    )
    gpt_seq_len: int | None = option(
        None,
        GPT,
        "tokens per sequence, one sample (default: the preset's)",
        metavar="TOKENS",
        at_least="positive",
        at_most=MAX_SEQ_LEN,
    )
    gpt_vocab: int | None = option(
        None,
        GPT,
        "vocabulary size (default: the preset's)",
        metavar="N",
        at_least="positive",
        at_most=MAX_VOCAB,
    )

    def sizes(self) -> tuple[int, int, int, int, int]:
        """(layers, width, heads, sequence length, vocabulary): given, else the preset's."""
        preset = PRESETS[self.gpt_preset]
        given = (getattr(self, name) for name in SIZES)
        return tuple(v if v is not None else p for v, p in zip(given, preset))  # type: ignore[return-value]


def check(opts: GptOptions, cfg: Any) -> GptOptions:
    """The sizes filled in from the preset; the width must split into the heads."""
    layers, width, heads, seq_len, vocab = opts.sizes()
    if width % heads:
        raise UsageError(
            f"--gpt-width {width} does not divide into --gpt-heads {heads} heads;"
            " give a width that is a multiple of the heads"
        )
    return replace(opts, **dict(zip(SIZES, opts.sizes())))


def parameters(opts: GptOptions) -> int:
    """Every parameter of the model (the tied token embedding and LM head once)."""
    layers, width, _, seq_len, vocab = opts.sizes()
    block = 12 * width * width + 13 * width  # qkv, proj, MLP up and down, two LayerNorms
    return vocab * width + seq_len * width + layers * block + 2 * width


def tokens_per_sample(opts: GptOptions) -> int:
    """A sample is one sequence: --gpt-seq-len tokens."""
    return opts.sizes()[3]


def flops_per_sample(opts: GptOptions) -> float:
    """Model FLOPs of one sequence's forward and backward: 6 N T + 12 L d T^2.

    T tokens a sequence, L layers of width d. N counts the parameters that multiply: every
    parameter but the position embedding (a lookup), the token embedding once as the LM head's
    matrix (tied). 6 N per token is the forward's 2 N and the backward's 4 N; 12 L d T per token
    is attention's scores and weighted sum (QK^T and AV: 2 x 2 d T a layer forward, x 3 with
    the backward), counted over the whole T x T matrix although the causal mask skips half, as
    PaLM's appendix B and nanoGPT's estimate_mfu count it. MFU divides these by peak FLOP/s."""
    layers, width, _, seq_len, _ = opts.sizes()
    n = parameters(opts) - seq_len * width
    return 6.0 * n * seq_len + 12.0 * layers * width * seq_len * seq_len


def build_model(opts: GptOptions) -> Any:
    """The decoder, initialised normal(0, 0.02) from the seed set before (gpt_model.py)."""
    from common.workloads.gpt_model import GPT as Model

    layers, width, heads, seq_len, vocab = opts.sizes()
    return Model(vocab=vocab, seq_len=seq_len, width=width, layers=layers, heads=heads)


def make_batch(opts: GptOptions, samples: int, generator: Any, device: Any) -> Batch:
    """Random token ids from `generator` on `device`, one more than a sequence: the inputs are
    the first T of each row, the targets the next token at each position (the last T)."""
    import torch

    _, _, _, seq_len, vocab = opts.sizes()
    tokens = torch.randint(0, vocab, (samples, seq_len + 1), generator=generator, device=device)
    return Batch(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())


def loss(logits: Any, targets: Any) -> Any:
    """Cross-entropy over the vocabulary at every position."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def describe(opts: GptOptions) -> str:
    """The model's sizes and parameter count, for a result's `model` field."""
    layers, width, heads, seq_len, vocab = opts.sizes()
    return (
        f"GPT-style decoder (torch.nn): {layers} layers x {width}, {heads} heads, sequence"
        f" {seq_len}, vocabulary {vocab}, {parameters(opts) / 1e6:.1f}M parameters"
    )


def data(opts: GptOptions, where: str) -> str:
    """The data, for a result's `data` field."""
    _, _, _, seq_len, vocab = opts.sizes()
    return (
        f"synthetic {where}-resident random token ids, sequences of {seq_len} from a vocabulary"
        f" of {vocab}; targets the next token"
    )


def title(opts: GptOptions) -> str:
    """'gpt (gpt2-small)', or the layers and width where sizes override the preset."""
    if opts.sizes() == PRESETS[opts.gpt_preset]:
        return f"gpt ({opts.gpt_preset})"
    layers, width, heads, seq_len, vocab = opts.sizes()
    return f"gpt ({layers}x{width}, {heads} heads, seq {seq_len}, vocab {vocab})"


workload = Workload(
    unit="tokens",
    sample="sequence",
    options=GptOptions,
    build_model=build_model,
    make_batch=make_batch,
    loss=loss,
    describe=describe,
    data=data,
    title=title,
    units_per_sample=tokens_per_sample,
    flops_per_sample=flops_per_sample,
    check=check,
    imports=("common.workloads.gpt_model",),
    unit_label="tok",
)
