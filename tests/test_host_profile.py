"""The diagnostic options on 2 gloo ranks: --pyprofile dumps exactly the timed steps (read by
benchmarks.host_profile), --host-delay-us spins inside every step; beside them --ddp-stream swaps
the construction stream (an ablation: an arm, not a diagnostic); each is recorded, and none
changes a single bit of the trained model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, TINY, lightning_installed, needs_lightning, run_module

from benchmarks import host_profile
from common.result import Result, load_result

pytestmark = pytest.mark.slow
DELAY_US = 30_000  # 30 ms a step: a lower bound on every timed step time


def two_rank_run(module: str, folder, *options: str) -> Result:
    out = folder / f"{module}.json"
    proc = run_module(module, [*TINY, "--devices", "2", "--output", str(out), *options])
    assert proc.returncode == 0, proc.stderr
    return load_result(out)


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Result:
    return two_rank_run("native", tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """native with every CPU-capable diagnostic option at once (--trace needs a GPU)."""
    folder = tmp_path_factory.mktemp("diag")
    dump = folder / "native.pstats"
    result = two_rank_run(
        "native",
        folder,
        "--pyprofile",
        str(dump),
        "--host-delay-us",
        str(DELAY_US),
        "--ddp-stream",
        "side",
    )
    return result, dump


@pytest.fixture(scope="module")
def lightning_diagnosed(tmp_path_factory):
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    folder = tmp_path_factory.mktemp("ldiag")
    dump = folder / "lightning_impl.pstats"
    options = ["--pyprofile", str(dump), "--ddp-stream", "current"]
    return two_rank_run("lightning_impl", folder, *options), dump


def test_diagnostic_options_are_recorded_in_config_and_diagnostics(diagnosed, plain):
    result, dump = diagnosed
    assert result.environment.diagnostics == {
        "--pyprofile": str(dump),
        "--host-delay-us": str(DELAY_US),
    }
    assert result.arm == "native-side-stream" and plain.arm == "native"
    config = result.config
    assert (config["pyprofile"], config["host_delay_us"], config["ddp_stream"]) == (
        str(dump),
        DELAY_US,
        "side",
    )
    assert plain.environment.diagnostics is None and plain.config["ddp_stream"] == "auto"


def test_diagnostic_options_change_no_bit_of_the_model(diagnosed, plain):
    result, _ = diagnosed
    assert result.parameters_synchronized
    assert [r.parameter_digest for r in result.ranks] == [r.parameter_digest for r in plain.ranks]
    assert result.final_loss_mean == plain.final_loss_mean


def test_host_delay_spins_inside_every_timed_step_on_every_rank(diagnosed):
    result, _ = diagnosed
    for rank in result.ranks:  # a spin of 30 ms cannot end sooner, and it is inside the step
        assert len(rank.step_times_ms) == 3 and min(rank.step_times_ms) >= DELAY_US / 1000


def test_native_dump_covers_the_timed_steps_only(diagnosed):
    _, dump = diagnosed
    stats, steps = host_profile.load(str(dump))
    assert steps == 3  # TINY warms up 2 steps; those are outside the dump
    groups = host_profile.by_group(stats, steps)
    assert groups["torch C++ entry points"][0] > 100  # ResNet-18's ops, per step
    assert groups["this suite"][0] >= 1 and "Lightning" not in groups
    calls = {func: nc for (_, _, func), (_, nc, *_rest) in stats.items()}
    assert calls["train_step"] == 3 and "build_model" not in calls


@needs_lightning
def test_lightning_runs_with_natives_ddp_stream_bit_identically(lightning_diagnosed, plain):
    # On CPUs there are no streams; this proves the swapped construction path runs and is recorded.
    # Which stream the gradients accumulate on is checked on a GPU (tests/test_gpu.py).
    result, dump = lightning_diagnosed
    assert result.environment.diagnostics == {"--pyprofile": str(dump)}
    assert result.arm == "lightning-current-stream"
    assert result.parameters_synchronized and result.parameter_digest == plain.parameter_digest


@needs_lightning
def test_comparison_names_lightning_code_per_step(diagnosed, lightning_diagnosed):
    (_, native), (_, lightning) = diagnosed, lightning_diagnosed
    stats, steps = host_profile.load(str(lightning))
    assert steps == 3 and host_profile.by_group(stats, steps)["Lightning"][0] > 10
    command = [
        sys.executable,
        "-m",
        "benchmarks.host_profile",
        str(native),
        str(lightning),
        "--top",
        "5",
    ]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "| Lightning | 0 |" in out and "native: 3 steps, lightning: 3 steps" in out
    assert len([line for line in out.splitlines() if line.startswith("| `")]) == 5


def test_a_file_that_is_not_a_step_dump_is_refused(tmp_path):
    import cProfile

    dump = tmp_path / "other.pstats"
    cProfile.run("sum(range(10))", str(dump))
    with pytest.raises(SystemExit, match="no StepHooks.after_step calls"):
        host_profile.load(str(dump))


def test_host_delay_option_reaches_the_step_hooks():
    import time

    import torch

    from common.config import BenchConfig
    from common.steps import StepHooks

    cfg = BenchConfig(accelerator="cpu", warmup_steps=1, steps=2, host_delay_us=20_000)  # 20 ms
    hooks = StepHooks(cfg, torch.device("cpu"), 0, print)
    for step in range(3):
        start = time.perf_counter()
        hooks.before_step(step)
        assert time.perf_counter() - start >= 0.02  # a spin of 20 ms cannot end sooner
        hooks.after_step(step)
    steps = hooks.timer.summary().step_times_ms
    assert len(steps) == 2 and min(steps) >= 20  # the spin is inside the timed step
