"""--workload gpt: the decoder's shape and causality, its batch, its FLOPs count, its options."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from common import config, training
from common.checks import parameter_digest
from common.workloads import gpt

CPU = torch.device("cpu")
# Sizes that differ from each other and from the preset (3 heads of 32), so that no count in a
# formula can stand for another.
ODD = ["--gpt-layers", "3", "--gpt-width", "96", "--gpt-heads", "3", "--gpt-seq-len", "40"]


def parse(*argv: str) -> config.BenchConfig:
    return config.parse(["--accelerator", "cpu", "--workload", "gpt", *argv], "test")


def tiny(*argv: str) -> config.BenchConfig:
    return parse("--gpt-preset", "tiny", *argv)


def test_the_preset_gives_the_sizes_and_each_size_given_overrides_it():
    assert parse().workload_options.sizes() == (12, 768, 12, 1024, 50_304)  # gpt2-small
    opts = tiny("--gpt-layers", "3", "--gpt-vocab", "1000").workload_options
    assert opts.sizes() == (3, 64, 4, 64, 1000)
    # the result records the sizes it ran with, not None
    assert (opts.gpt_layers, opts.gpt_width, opts.gpt_seq_len) == (3, 64, 64)
    assert tiny().workload_options.gpt_heads == 4


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--gpt-width", "100"], "--gpt-width 100 does not divide into --gpt-heads 12 heads"),
        (["--gpt-heads", "0"], "--gpt-heads must be positive, got 0"),
        (["--gpt-seq-len", "-1"], "--gpt-seq-len must be positive, got -1"),
        (["--gpt-vocab", str(2**40)], "--gpt-vocab 1099511627776 is too large"),
        (["--gpt-preset", "large"], "argument --gpt-preset: invalid choice: 'large'"),
    ],
)
def test_bad_sizes_are_refused_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse(*argv)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_the_model_has_the_parameters_its_declaration_counts_and_ties_the_lm_head():
    for cfg in (tiny(), tiny(*ODD)):
        model = training.build_model(cfg)
        assert sum(p.numel() for p in model.parameters()) == gpt.parameters(cfg.workload_options)
        assert model.lm_head.weight is model.wte.weight


def test_init_is_normal_0_002_from_the_seed():
    model = training.build_model(tiny(*ODD))
    with torch.no_grad():
        weights = torch.cat([model.wte.weight.flatten(), model.blocks[0].mlp[0].weight.flatten()])
    assert abs(float(weights.mean())) < 0.002 and float(weights.std()) == pytest.approx(0.02, 0.05)
    assert not model.blocks[0].attn.qkv.bias.detach().any()  # biases start at zero
    same = parameter_digest(training.build_model(tiny(*ODD))).sha256
    assert parameter_digest(model).sha256 == same
    assert parameter_digest(training.build_model(tiny(*ODD, "--seed", "1"))).sha256 != same


def test_the_batch_is_token_ids_and_the_targets_are_the_next_tokens():
    cfg = tiny()
    batch = training.make_batch(cfg, 3, 0, CPU)
    _, _, _, seq_len, vocab = cfg.workload_options.sizes()
    assert batch.inputs.shape == batch.targets.shape == (3, seq_len)
    assert batch.inputs.dtype == torch.int64 and 0 <= int(batch.inputs.min())
    assert int(batch.inputs.max()) < vocab and int(batch.targets.max()) < vocab
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1])  # shifted by one token
    again, other = training.make_batch(cfg, 3, 0, CPU), training.make_batch(cfg, 3, 1, CPU)
    assert torch.equal(again.inputs, batch.inputs) and not torch.equal(other.inputs, batch.inputs)


def test_attention_is_causal_a_later_token_changes_no_earlier_logit():
    cfg = tiny()
    model = training.build_model(cfg).eval()
    ids = training.make_batch(cfg, 2, 0, CPU).inputs
    changed = ids.clone()
    changed[:, 40] = (changed[:, 40] + 1) % cfg.workload_options.gpt_vocab
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert a.shape == (2, 64, 512)
    assert torch.equal(a[:, :40], b[:, :40]) and not torch.equal(a[:, 40:], b[:, 40:])


def test_the_loss_is_cross_entropy_over_the_vocabulary_near_log_v_at_init():
    cfg = tiny()
    batch = training.make_batch(cfg, 4, 0, CPU)
    loss = gpt.loss(training.build_model(cfg)(batch.inputs), batch.targets)
    assert loss.shape == () and loss.item() == pytest.approx(math.log(512), rel=0.02)


def test_flops_per_sample_is_6nt_plus_12ldt2_as_torch_counts_a_step():
    """torch's FLOP counter over one forward and backward (attention through its math kernel,
    whose matrix products it counts over the whole T x T matrix): the matrix products are
    6 T x (matrix weights) + 12 L d T^2 exactly; the formula's N also counts the biases and
    LayerNorms (6 T each), which the counter leaves out."""
    cfg = tiny(*ODD)
    opts, model = cfg.workload_options, training.build_model(cfg)
    layers, width, _, seq_len, _ = opts.sizes()
    batch = training.make_batch(cfg, 2, 0, CPU)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        gpt.loss(model(batch.inputs), batch.targets).backward()
    counted = counter.get_total_flops() / 2  # per sequence
    named = dict(model.named_parameters())
    matrices = sum(p.numel() for n, p in named.items() if p.dim() == 2 and n != "wpe.weight")
    vectors = sum(p.numel() for p in named.values() if p.dim() == 1)
    assert counted == 6 * seq_len * matrices + 12 * layers * width * seq_len**2
    assert gpt.flops_per_sample(opts) == counted + 6 * seq_len * vectors


def test_gpt2_small_is_124m_parameters_and_its_flops_per_token():
    opts = parse().workload_options
    assert gpt.parameters(opts) == 124_475_904  # GPT-2's 124M with the padded vocabulary
    per_token = gpt.flops_per_sample(opts) / 1024
    n = 124_475_904 - 1024 * 768
    assert per_token == 6 * n + 12 * 12 * 768 * 1024


def test_the_declaration_counts_tokens_and_titles_the_preset():
    wl, opts = gpt.workload, tiny().workload_options
    assert wl.units_per_sample(opts) == 64 and wl.unit == "tokens" and wl.sample == "sequence"
    assert wl.title(opts) == "gpt (tiny)"
    assert wl.title(tiny("--gpt-layers", "3").workload_options).startswith("gpt (3x64, 4 heads")
    assert "2 layers x 64, 4 heads, sequence 64, vocabulary 512" in wl.describe(opts)
