"""The cProfile diagnostic: DDPBENCH_PYPROFILE dumps exactly the timed steps, host_profile reads them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from common.result import load_result
from conftest import ROOT, TINY, clean_env, needs_lightning, run_module

sys.path.insert(0, str(ROOT / "benchmarks"))
import host_profile  # noqa: E402

pytestmark = pytest.mark.slow


def profiled_run(module: str, tmp_path, steps: int):
    dump = tmp_path / f"{module}.pstats"
    args = [*TINY, "--devices", "1", "--steps", str(steps), "--output", str(tmp_path / f"{module}.json")]
    proc = run_module(module, args, env=clean_env(DDPBENCH_PYPROFILE=str(dump)))
    assert proc.returncode == 0, proc.stderr
    # the result says it was a diagnostic run, so compare can warn about it
    assert load_result(tmp_path / f"{module}.json").environment.diagnostics == {"DDPBENCH_PYPROFILE": str(dump)}
    return dump


def test_native_dump_covers_the_timed_steps_only(tmp_path):
    dump = profiled_run("native", tmp_path, steps=4)
    stats, steps = host_profile.load(str(dump))
    assert steps == 4  # TINY warms up 2 steps; those are outside the dump
    groups = host_profile.by_group(stats, steps)
    assert groups["torch C++ entry points"][0] > 100  # ResNet-50's ops, per step
    assert groups["this suite"][0] >= 1 and "Lightning" not in groups
    calls = {func: nc for (_, _, func), (_, nc, *_rest) in stats.items()}
    assert calls["train_step"] == 4 and "build_model" not in calls


@needs_lightning
def test_comparison_names_lightning_code_per_step(tmp_path):
    native, lightning = profiled_run("native", tmp_path, 3), profiled_run("lightning_impl", tmp_path, 3)
    stats, steps = host_profile.load(str(lightning))
    assert steps == 3 and host_profile.by_group(stats, steps)["Lightning"][0] > 10
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_profile.py"), str(native), str(lightning),
                          "--top", "5"], capture_output=True, text=True, check=True).stdout
    assert "| Lightning | 0 |" in out and "native: 3 steps, lightning: 3 steps" in out
    assert len([line for line in out.splitlines() if line.startswith("| `")]) == 5


def test_a_file_that_is_not_a_step_dump_is_refused(tmp_path):
    import cProfile
    dump = tmp_path / "other.pstats"
    cProfile.run("sum(range(10))", str(dump))
    with pytest.raises(SystemExit, match="no StepHooks.after_step calls"):
        host_profile.load(str(dump))


def test_host_delay_spins_inside_every_step(monkeypatch):
    import time

    import torch

    from common.config import BenchConfig
    from common.steps import HOST_DELAY_VAR, StepHooks
    monkeypatch.setenv(HOST_DELAY_VAR, "20000")  # 20 ms
    hooks = StepHooks(BenchConfig(accelerator="cpu", warmup_steps=1, steps=2), torch.device("cpu"), 0, print)
    for step in range(3):
        start = time.perf_counter()
        hooks.before_step(step)
        assert time.perf_counter() - start >= 0.02  # a spin of 20 ms cannot end sooner
        hooks.after_step(step)
    steps = hooks.timer.summary().step_times_ms
    assert len(steps) == 2 and min(steps) >= 20  # the spin is inside the timed step


@pytest.mark.parametrize("module,stream", [("native", "side"),
                                           pytest.param("lightning_impl", "current", marks=needs_lightning)])
def test_each_runner_runs_with_the_others_ddp_stream(module, stream, tmp_path):
    # On CPUs there are no streams; this proves the swapped construction path runs and is recorded.
    # Which stream the gradients accumulate on is checked on a GPU (tests/test_gpu.py).
    out = tmp_path / "r.json"
    proc = run_module(module, [*TINY, "--devices", "2", "--output", str(out)],
                      env=clean_env(DDPBENCH_DDP_STREAM=stream))
    assert proc.returncode == 0, proc.stderr
    r = load_result(out)
    assert r.environment.diagnostics == {"DDPBENCH_DDP_STREAM": stream} and r.parameters_synchronized
