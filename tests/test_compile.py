"""--compile in every arm: the same torch.compile call before the DDP wrapper in native, Fabric,
the Trainer (barebones and services) and every ablation, on the tiny gpt and a small CNN, each
run forked by one `python -m experiment` whose experiments (a variant each) give their runs one
compile cache each. On CPU (2 gloo ranks, bf16 autocast) every arm ends bit for bit with
native's parameters and loss, the first run compiles and every later one loads its graphs from
the cache, and the manifest and the runs' logs say so. Fabric's own `_FabricModule.module` fails
on a compiled model (docs/findings/); the arms read the model another way, which these runs
pin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env, needs_lightning

from common.arms import ARMS
from common.manifest import load_manifest
from common.result import load_result
from experiment import plans
from experiment.settings import COMPILE_MODULES


@pytest.fixture(scope="module")
def compiled(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The responsibilities-cpu plan compiled, both variants in one experiment (one command, one
    set of fork servers; a cache per variant): its output, its folder and its temp folder."""
    tmp_path = tmp_path_factory.mktemp("compiled")
    out, temp = tmp_path / "exp", tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "experiment", "--plan", "responsibilities-cpu"),
            *("--repeats", "1", "--warmup-runs", "0"),
            *("--settle-minutes", "0", "--out", str(out)),
            *("--", "--compile", "--warmup-steps", "1", "--steps", "2"),
        ],
        cwd=ROOT,
        env=clean_env(TMPDIR=str(temp)),
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, out, temp


@pytest.mark.slow
@needs_lightning
@pytest.mark.parametrize("variant", ["gpt", "image"])
def test_every_arm_compiles_once_and_ends_bit_identical(variant, compiled):
    proc, out, temp = compiled
    folder = out / variant
    manifest = load_manifest(folder / "manifest.json")
    runs = [run for run in manifest.runs if run.status == "ok"]
    assert sorted(run.label for run in runs) == sorted(
        a.label for a in plans.find("responsibilities-cpu").arms
    )  # every arm of the table ran, none failed
    # one cache for the experiment: the first run compiled, and a runner whose graphs are in
    # the cache loads them. Fabric's precision plugin casts a floating input (an image) to
    # bf16 before the forward, so on images Fabric's first run compiles a graph of its own.
    assert runs[0].compile_cache == "miss"
    ran: set[str] = set()
    for run in runs:
        runner = ARMS[run.label].runner
        if run is not runs[0]:
            assert run.compile_cache in (("hit",) if runner in ran else ("hit", "partial")), run
        ran.add(runner)
    if variant == "gpt":  # token ids go in as they are: every arm shares the first run's graphs
        assert [run.compile_cache for run in runs[1:]] == ["hit"] * (len(runs) - 1)
    assert "compile cache hit" in proc.stdout
    results = {run.label: load_result(folder / run.result) for run in runs}
    native = results["native"]
    for label, result in results.items():
        assert result.config["compile"] is True, label
        assert (result.parameter_digest, result.final_loss_mean) == (
            native.parameter_digest,
            native.final_loss_mean,
        ), label
        assert all(r.compile_cache is not None for r in result.ranks), label
    # the cache lived for the experiment only: nothing of it is left in the temp folder
    assert not list(temp.glob("ddpbench-compile-*"))


def test_the_fork_server_can_import_torch_compile_without_touching_the_gpu():
    # A compiling experiment's fork servers import what torch.compile needs before they fork
    # (experiment.settings.COMPILE_MODULES); a server whose imports initialised CUDA could not
    # fork a run that uses the GPU. With every torch.cuda entry point spied on (and a GPU
    # pretended), the imports call none of them.
    code = f"""
import torch
calls = []
def spy(name, value):
    def call(*args, **kwargs):
        calls.append(name)
        return value
    return call
for name, value in [("is_available", True), ("_lazy_init", None), ("device_count", 1),
                    ("get_device_capability", (9, 0)), ("get_device_properties", None),
                    ("current_device", 0), ("init", None)]:
    setattr(torch.cuda, name, spy(name, value))
for module in {list(COMPILE_MODULES)!r}:
    __import__(module)
assert not calls, calls
assert not torch.cuda.is_initialized()
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=clean_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
