"""The runners, 2 ranks on CPU (gloo), self-launched and under torchrun; exactness between them."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from common.result import Result, load_result
from common.source import source_digest

from conftest import TINY, lightning_installed, needs_lightning, run_module

pytestmark = pytest.mark.slow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def run_to_result(module: str, out: Path, *extra: str, launcher: list[str] | None = None) -> Result:
    proc = run_module(module, [*TINY, "--devices", "2", "--output", str(out), *extra], launcher=launcher)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    result = load_result(out)
    assert isinstance(result, Result)
    return result


@pytest.fixture(scope="module")
def native_self(tmp_path_factory) -> Result:
    return run_to_result("native", tmp_path_factory.mktemp("n") / "native.json")


@pytest.fixture(scope="module")
def lightning_self(tmp_path_factory) -> Result:
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    return run_to_result("lightning_impl", tmp_path_factory.mktemp("l") / "lightning.json")


@pytest.fixture(scope="module")
def fabric_self(tmp_path_factory) -> Result:
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    return run_to_result("lightning_impl.fabric", tmp_path_factory.mktemp("f") / "fabric.json")


@pytest.fixture(scope="module")
def services_run(tmp_path_factory) -> tuple[Result, Path]:
    """The Trainer with its services on; returns the result and its services folder."""
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    out = tmp_path_factory.mktemp("s") / "services.json"
    return run_to_result("lightning_impl", out, "--no-barebones"), out.with_name("services.lightning")


def check_valid_two_rank_run(result: Result, implementation: str, launcher: str) -> None:
    assert result.implementation == implementation
    assert result.world_size == 2 and len(result.ranks) == 2
    assert result.environment.launcher == launcher and result.environment.backend == "gloo"
    assert result.parameters_synchronized and result.parameter_checksum_max_difference == 0
    assert all(len(r.step_times_ms) == 3 for r in result.ranks)
    assert result.batch_size_per_device == 2 and result.global_batch_size == 4
    assert result.precision_resolved == "fp32"
    assert result.environment.source_digest == source_digest()  # the code that ran is this tree's


def test_native_self_launched_two_ranks(native_self):
    check_valid_two_rank_run(native_self, "native", "self")
    assert native_self.lightning is None and native_self.lightning_version is None


def test_native_under_torchrun(tmp_path):
    result = run_to_result("native", tmp_path / "r.json", launcher=TORCHRUN)
    check_valid_two_rank_run(result, "native", "torchrun")


@needs_lightning
def test_lightning_self_launched_two_ranks(lightning_self):
    check_valid_two_rank_run(lightning_self, "lightning", "self")
    assert lightning_self.lightning.barebones and lightning_self.lightning_barebones
    assert lightning_self.lightning.per_step_sigterm_sync  # world size 2, Lightning >= 2.5.2


@needs_lightning
def test_lightning_under_torchrun_with_a_global_batch(tmp_path):
    out = tmp_path / "r.json"
    args = ["--accelerator", "cpu", "--image-size", "64", "--global-batch-size", "4", "--warmup-steps", "2",
            "--steps", "3", "--devices", "2", "--output", str(out)]
    proc = run_module("lightning_impl", args, launcher=TORCHRUN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = load_result(out)
    check_valid_two_rank_run(result, "lightning", "torchrun")
    assert result.batch_mode == "fixed_global"


@needs_lightning
def test_fabric_self_launched_two_ranks(fabric_self):
    check_valid_two_rank_run(fabric_self, "fabric", "self")
    assert fabric_self.lightning.version and not fabric_self.lightning.per_step_sigterm_sync
    assert fabric_self.lightning.barebones and not fabric_self.lightning.autocast_cache_enabled


@needs_lightning
def test_fabric_under_torchrun(tmp_path):
    result = run_to_result("lightning_impl.fabric", tmp_path / "r.json", launcher=TORCHRUN)
    check_valid_two_rank_run(result, "fabric", "torchrun")


@needs_lightning
def test_services_run_logs_every_step_and_checkpoints(services_run):
    result, folder = services_run
    check_valid_two_rank_run(result, "lightning", "self")
    assert result.lightning.barebones is False and result.lightning_barebones is False
    rows = list(csv.DictReader((folder / "csv" / "version_0" / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == list(range(2 + 3))  # warm-up + timed steps
    assert all(float(r["loss"]) > 0 for r in rows)
    assert [p.suffix for p in (folder / "checkpoints").iterdir()] == [".ckpt"]


@needs_lightning
def test_services_refuse_an_existing_folder(tmp_path):
    (tmp_path / "r.lightning").mkdir()
    proc = run_module("lightning_impl", [*TINY, "--no-barebones", "--output", str(tmp_path / "r.json")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"lightning_impl: error: --no-barebones keeps the Trainer's logs and"
                                   f" checkpoints in {tmp_path / 'r.lightning'}, which already exists;"
                                   " move it away or choose another --output")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.lightning"]


@needs_lightning
def test_every_arm_is_bit_identical_to_native_on_cpu(native_self, fabric_self, lightning_self, services_run):
    """Same options, same threads: the frameworks (and the Trainer's services) must not change a
    single bit of the numerics."""
    for other in (fabric_self, lightning_self, services_run[0]):
        assert native_self.parameter_digest == other.parameter_digest, other.implementation
        assert [r.final_loss for r in native_self.ranks] == [r.final_loss for r in other.ranks]
        assert [r.parameter_digest for r in native_self.ranks] == [r.parameter_digest for r in other.ranks]


@needs_lightning
def test_every_runner_resolves_every_configuration_field_alike(native_self, fabric_self, lightning_self):
    for other in (fabric_self, lightning_self):
        assert {**native_self.config, "output": None} == {**other.config, "output": None}
        fields = ["precision", "batch_mode", "batch_size_per_device", "global_batch_size", "world_size",
                  "warmup_steps", "measured_steps", "precision_requested", "precision_resolved", "seed",
                  "model", "data"]
        for name in fields:
            assert getattr(native_self, name) == getattr(other, name), name
        assert [r.omp_num_threads for r in native_self.ranks] == [r.omp_num_threads for r in other.ranks]


def test_summary_is_printed_even_without_output(tmp_path):
    proc = run_module("native", [*TINY, "--devices", "1", "--warmup-steps", "0", "--steps", "1"])
    assert proc.returncode == 0, proc.stderr
    assert "Native PyTorch DDP benchmark" in proc.stdout and "not written (no --output)" in proc.stdout
    assert list(tmp_path.iterdir()) == []
