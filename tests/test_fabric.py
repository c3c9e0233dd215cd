"""The Fabric arm and the Trainer's services: refusals, failure behaviour, the same DDPStrategy."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from conftest import ROOT, TINY, clean_env, needs_lightning, refusal, run_module
from test_failures import PROMPT, TORCHRUN, assert_nothing_left

from common import config, launcher, precision, training


@pytest.mark.parametrize(
    "module", ["native", pytest.param("lightning_impl.fabric", marks=needs_lightning)]
)
def test_no_barebones_is_refused_outside_the_trainer_with_one_line(module, tmp_path):
    line = refusal(module, [*TINY, "--no-barebones", "--output", str(tmp_path / "r.json")])
    assert line == (
        f"{module}: error: --no-barebones applies to the Lightning"
        " Trainer only (python -m lightning_impl); leave it out here\n"
    )
    assert list(tmp_path.iterdir()) == []


@needs_lightning
@pytest.mark.parametrize("stream", ["auto", "current"])
def test_both_lightning_arms_get_ddpstrategy_with_natives_arguments(stream):
    """The Trainer's strategy has native's DDP arguments; both arms swap the stream alike."""
    from lightning.fabric.strategies import DDPStrategy

    from lightning_impl import ablations, trainer

    cfg = config.parse(["--accelerator", "cpu", "--devices", "2", "--ddp-stream", stream], "t")
    prec = precision.resolve_precision("fp32", "cpu", False)
    strategy = trainer.trainer_setup(cfg, launcher.detect({}), prec).strategy
    assert strategy._ddp_kwargs == training.ddp_kwargs(cfg)
    assert strategy.process_group_backend == "gloo"
    assert strategy._timeout == dt.timedelta(seconds=cfg.timeout)
    fabric_class = ablations.ddp_strategy_class(cfg, DDPStrategy)
    for cls in (type(strategy), fabric_class):
        assert (cls.__name__ == "CurrentStreamDDPStrategy") == (stream == "current")


def test_fabric_passes_the_trainers_strategy_arguments():
    """The DDPStrategy(...) call is the same text in both Lightning files, comments aside."""

    def strategy_call(path: str) -> str:
        text = (ROOT / path).read_text()
        start = text.index("strategy = ablations.ddp_strategy_class(cfg, DDPStrategy)(")
        body = text[start : text.index("\n    )\n", start)]
        return "\n".join(line for line in body.splitlines() if not line.strip().startswith("#"))

    assert strategy_call("lightning_impl/fabric.py") == strategy_call("lightning_impl/trainer.py")


@pytest.mark.slow
@needs_lightning
@pytest.mark.parametrize(
    "rank,kind,expect",
    [
        (1, "raise", "rank 1 failed: InjectedFault: injected failure at step 3"),
        (
            0,
            "raise",
            "rank 0 failed: InjectedFault: injected failure at step 3",
        ),  # the launching rank
        (1, "kill", ""),
    ],
)
def test_fabric_dying_rank_stops_all_ranks(rank, kind, expect, tmp_path):
    out = tmp_path / "r.json"
    started = time.monotonic()
    args = [*TINY, "--devices", "2", "--steps", "100", "--output", str(out)]
    proc = run_module(
        "lightning_impl.fabric",
        args,
        timeout=PROMPT,
        env=clean_env(DDPBENCH_FAULT=f"rank={rank},step=3,kind={kind}"),
    )
    assert time.monotonic() - started < PROMPT
    assert proc.returncode != 0 and expect in proc.stderr and "Traceback" not in proc.stderr
    assert_nothing_left(out)


@pytest.mark.slow
@needs_lightning
def test_fabric_dying_rank_stops_all_ranks_under_torchrun(tmp_path):
    out = tmp_path / "r.json"
    args = [*TINY, "--devices", "2", "--steps", "100", "--output", str(out)]
    proc = run_module(
        "lightning_impl.fabric",
        args,
        timeout=PROMPT,
        launcher=TORCHRUN,
        env=clean_env(DDPBENCH_FAULT="rank=1,step=3,kind=raise"),
    )
    assert proc.returncode != 0 and "rank 1 failed: InjectedFault" in proc.stderr
    assert_nothing_left(out)
