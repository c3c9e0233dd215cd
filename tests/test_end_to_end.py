"""The runners, 2 ranks on CPU (gloo), self-launched and under torchrun; exactness between them."""

from __future__ import annotations

import csv
import hashlib
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TINY, lightning_installed, needs_lightning, refusal, run_module

import image_before
from common.result import Result, load_interleaved, load_result
from common.source import source_digest

pytestmark = pytest.mark.slow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
# The gpt workload's CPU configuration: the tiny preset, a few steps
GPT_TINY = [
    *("--accelerator", "cpu", "--workload", "gpt", "--gpt-preset", "tiny"),
    *("--batch-size-per-device", "2", "--warmup-steps", "2", "--steps", "3"),
]


def run_to_result(module: str, out: Path, *extra: str, launcher: list[str] | None = None) -> Result:
    proc = run_module(
        module, [*TINY, "--devices", "2", "--output", str(out), *extra], launcher=launcher
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    result = load_result(out)
    assert isinstance(result, Result)
    return result


# The fresh self-launched run of each runner (and the Trainer's services), made once in the
# session by the corpus (tests/conftest.py): tests/test_ablations.py reads Fabric's too.
SELF = [*TINY, "--devices", "2"]


IMPORTTIME = [sys.executable, "-X", "importtime"]  # the parent's flag only: its imports


@pytest.fixture(scope="module")
def native_self(corpus) -> Result:
    return corpus.run("native", SELF, fresh=True, launcher=IMPORTTIME).result


@pytest.fixture(scope="module")
def lightning_self(corpus) -> Result:
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    return corpus.run("lightning_impl", SELF, fresh=True).result


@pytest.fixture(scope="module")
def fabric_self(corpus) -> Result:
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    return corpus.run("lightning_impl.fabric", SELF, fresh=True).result


@pytest.fixture(scope="module")
def services_run(corpus) -> tuple[Result, Path]:
    """The Trainer with its services on; returns the result and its services folder."""
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    run = corpus.run("lightning_impl", [*SELF, "--no-barebones"], fresh=True)
    return run.result, run.folder / "result.lightning"


def check_valid_two_rank_run(result: Result, implementation: str, launcher: str) -> None:
    assert result.implementation == implementation
    assert result.world_size == 2 and len(result.ranks) == 2
    assert result.environment.launcher == launcher and result.environment.backend == "gloo"
    assert result.parameters_synchronized and result.parameter_checksum_max_difference == 0
    assert all(len(r.step_times_ms) == 3 for r in result.ranks)
    assert result.batch_size_per_device == 2 and result.global_batch_size == 4
    assert result.precision.resolved == "fp32"
    assert result.environment.source_digest == source_digest()  # the code that ran is this tree's
    check_time_split(result, launcher)


def check_time_split(result: Result, launcher: str) -> None:
    """Every result carries each rank's host CPU time per timed step and where its time went."""
    assert result.host_ms_per_step > 0 and all(r.host_ms_per_step > 0 for r in result.ranks)
    assert result.phase_seconds == result.ranks[0].phase_seconds.model_copy(
        update={"report": result.phase_seconds.report}
    )  # rank 0's, reported up to the result
    for rank in result.ranks:
        p = rank.phase_seconds
        assert min(p.imports, p.process_group, p.build, p.warmup, p.timed, p.report) > 0, p
        assert p.timed == pytest.approx(rank.elapsed_seconds) and p.profiled == 0  # CPU
        # Who started the process: torchrun or native's launcher every rank, Lightning's rank 0
        # the others
        launched = launcher == "torchrun" or result.implementation == "native" or rank.rank > 0
        assert (p.launch is not None) == launched, (rank.rank, p)


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
    args = [
        "--accelerator",
        "cpu",
        "--image-size",
        "64",
        "--global-batch-size",
        "4",
        "--warmup-steps",
        "2",
        "--steps",
        "3",
        "--devices",
        "2",
        "--output",
        str(out),
    ]
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
    # the loss logged is rank 0's loss: a cross-entropy, its last the one the result records
    assert all(float(r["loss"]) >= 0 for r in rows)
    assert float(rows[-1]["loss"]) == result.ranks[0].final_loss
    assert [p.suffix for p in (folder / "checkpoints").iterdir()] == [".ckpt"]


@needs_lightning
def test_services_refuse_an_existing_folder(tmp_path):
    (tmp_path / "r.lightning").mkdir()
    line = refusal(
        "lightning_impl", [*TINY, "--no-barebones", "--output", str(tmp_path / "r.json")]
    )
    assert line == (
        f"lightning_impl: error: --no-barebones keeps the Trainer's logs and"
        f" checkpoints in {tmp_path / 'r.lightning'}, which already exists;"
        " move it away or choose another --output\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.lightning"]


@needs_lightning
def test_every_arm_is_bit_identical_to_native_on_cpu(
    native_self, fabric_self, lightning_self, services_run
):
    """Same options, same threads: the frameworks (and the Trainer's services) must not change a
    single bit of the numerics."""
    for other in (fabric_self, lightning_self, services_run[0]):
        assert native_self.parameter_digest == other.parameter_digest, other.implementation
        assert [r.final_loss for r in native_self.ranks] == [r.final_loss for r in other.ranks]
        assert [r.parameter_digest for r in native_self.ranks] == [
            r.parameter_digest for r in other.ranks
        ]


@needs_lightning
def test_every_runner_resolves_every_configuration_field_alike(
    native_self, fabric_self, lightning_self
):
    for other in (fabric_self, lightning_self):
        assert {**native_self.config, "output": None} == {**other.config, "output": None}
        fields = [
            "precision",
            "batch_mode",
            "batch_size_per_device",
            "global_batch_size",
            "world_size",
            "warmup_steps",
            "measured_steps",
            "workload",
            "seed",
            "model",
            "data",
        ]
        for name in fields:
            assert getattr(native_self, name) == getattr(other, name), name
        assert [r.omp_num_threads for r in native_self.ranks] == [
            r.omp_num_threads for r in other.ranks
        ]


def imported(stderr: str) -> set[str]:
    """Module names in `python -X importtime` output."""
    return set(re.findall(r"^import time:.*\|\s*([\w.]+)$", stderr, re.M))


@pytest.mark.parametrize("options", [TINY, GPT_TINY], ids=["image", "gpt"])
def test_a_self_launched_native_parent_imports_no_torch(options, corpus):
    """The launching process decides and starts the ranks without torch: one import per rank
    (a built-in workload's declaration imports no torch; its model is imported in the ranks).
    The image run is native_self's."""
    run = corpus.run("native", [*options, "--devices", "2"], fresh=True, launcher=IMPORTTIME)
    names = imported(run.stderr)
    assert "native.launch" in names and "common.preflight" in names
    assert not names & {"torch", "torchvision", "numpy", "native.benchmark"}, names
    assert run.result.world_size == 2


def test_one_device_runs_in_the_one_process(corpus):
    """before's run (below) is one device: it trains in the process that was started."""
    run = corpus.run("native", BEFORE_RUN, fresh=True, launcher=IMPORTTIME)
    assert "native.benchmark" in imported(run.stderr)  # trained here, not in a child
    result = run.result
    assert result.phase_seconds.launch is None and result.host_ms_per_step > 0


@pytest.mark.parametrize(
    "module",
    [
        "native",
        pytest.param("lightning_impl", marks=needs_lightning),
        pytest.param("lightning_impl.fabric", marks=needs_lightning),
    ],
)
def test_check_validates_like_a_rank_and_launches_nothing(module, tmp_path):
    out = tmp_path / "r.json"
    proc = run_module(
        module,
        [*TINY, "--devices", "2", "--output", str(out), "--check"],
        launcher=[sys.executable, "-X", "importtime"],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == (
        f"{module}: check passed: 2 rank(s) via self, cpu, precision fp32,"
        " 1 thread(s) per rank; nothing launched\n"
    )
    assert list(tmp_path.iterdir()) == []
    if module == "native":  # the others import their runner, which imports torch and Lightning
        assert "torch" not in imported(proc.stderr)
    line = refusal(module, [*TINY, "--devices", "2", "--check"], OMP_NUM_THREADS="many")
    assert "OMP_NUM_THREADS='many' must be a whole number" in line


@needs_lightning
def test_the_trainers_sigterm_broadcast_is_counted_in_its_host_cost(corpus):
    """The Trainer's per-step SIGTERM broadcast (2 gloo ranks) lies inside the timed steps on
    the main thread, so host_ms_per_step counts it. One broadcast costs ~0.1 ms of CPU here,
    below the run-to-run spread of a step's compute, so a test-only switch makes the loop
    broadcast 0 or REPEATS times a step (Lightning's own method): the difference is REPEATS
    broadcasts' CPU time, and the assertion asks for a fifth of a conservative floor of it."""
    repeats, floor_ms = 200, 0.02  # measured 0.08-0.12 ms of CPU per broadcast on 2 busy cores
    args = [
        "--accelerator",
        "cpu",
        "--arch",
        "squeezenet1_1",
        "--image-size",
        "32",
        "--num-classes",
        "10",
        "--lr",
        "0.001",
        "--batch-size-per-device",
        "1",
        "--warmup-steps",
        "2",
        "--steps",
        "20",
        "--devices",
        "2",
    ]
    host = {}
    for times in (0, repeats):  # forked by the corpus: the loop is the same, the start cheaper
        run = corpus.run("lightning_impl", args, env={"DDPBENCH_SIGTERM_BROADCASTS": str(times)})
        result = run.result
        assert result.lightning.per_step_sigterm_sync
        assert result.environment.diagnostics == {"DDPBENCH_SIGTERM_BROADCASTS": str(times)}
        host[times] = [r.host_ms_per_step for r in result.ranks]
    # 19 of the 20 timed steps carry a broadcast: step W's comes before the timed region
    extra = [with_ - without for with_, without in zip(host[repeats], host[0])]
    assert all(ms > 0.2 * floor_ms * repeats * 19 / 20 for ms in extra), host


def test_summary_is_printed_even_without_output(tmp_path):
    proc = run_module("native", [*TINY, "--devices", "1", "--warmup-steps", "0", "--steps", "1"])
    assert proc.returncode == 0, proc.stderr
    assert (
        "Native PyTorch DDP benchmark" in proc.stdout and "not written (no --output)" in proc.stdout
    )
    assert list(tmp_path.iterdir()) == []


# --- workloads: the image workload as before, gpt and your own in every arm -------------------

# The image workload's run of before (main at a763650, before common/workloads), trained: its
# loop written out in plain torch (tests/image_before.py) and computed here, on this CPU.
BEFORE_RUN = [
    *image_before.OPTIONS,
    *("--batch-size-per-device", "4", "--warmup-steps", "1", "--steps", "2"),
]
CUSTOM = "examples.custom_workload:workload"


def test_an_image_run_ends_with_the_parameters_and_loss_of_before(corpus):
    """A run of native (one rank, a process group and DDP) ends bit for bit where before's plain
    loop ends on this machine: the workload's declaration changed no number."""
    result = corpus.run("native", BEFORE_RUN, fresh=True, launcher=IMPORTTIME).result
    expected = image_before.trained(samples=4, steps=1 + 2)
    assert (result.parameter_digest, result.ranks[0].final_loss) == expected
    assert result.model == "torchvision.models.resnet18" and result.workload.name == "image"
    assert result.data == "synthetic CPU-resident 3x64x64 images with random labels"
    assert result.units_per_second_median == result.samples_per_second_median  # an image a unit


@pytest.fixture(scope="module")
def gpt_runs(corpus) -> dict[str, Result]:
    """gpt (tiny) in every arm, 2 gloo ranks each, forked by the corpus (the fresh starts are
    the image runs' above)."""
    arms = {"native": ("native",)}
    if lightning_installed():
        arms |= {
            "fabric": ("lightning_impl.fabric",),
            "lightning": ("lightning_impl",),
            "lightning-services": ("lightning_impl", "--no-barebones"),
        }
    return {
        arm: corpus.run(module, [*GPT_TINY, "--devices", "2", *extra]).result
        for arm, (module, *extra) in arms.items()
    }


def test_a_gpt_run_records_its_workload_tokens_and_no_mfu_on_cpu(gpt_runs):
    r = gpt_runs["native"]
    check_valid_two_rank_run(r, "native", "self")
    assert (r.workload.name, r.workload.unit, r.workload.units_per_sample) == ("gpt", "tokens", 64)
    assert r.workload.options["gpt_layers"] == 2 and "gpt_vocab" not in r.config
    assert r.workload.unit_label == "tok"
    assert r.units_per_second_median == pytest.approx(r.samples_per_second_median * 64)
    assert r.workload.flops_per_sample > 0 and r.mfu is None and r.peak_flops_per_device is None
    assert r.model.startswith("GPT-style decoder") and "arch" not in r.config


@needs_lightning
def test_every_arm_is_bit_identical_to_native_on_cpu_for_gpt(gpt_runs):
    native = gpt_runs["native"]
    for arm, other in gpt_runs.items():
        assert other.parameter_digest == native.parameter_digest, arm
        assert [r.final_loss for r in other.ranks] == [r.final_loss for r in native.ranks], arm
        assert {**other.config, "output": None, "barebones": True} == {
            **native.config,
            "output": None,
        }, arm


@pytest.mark.parametrize(
    "module,extra",
    [
        ("native", ()),
        pytest.param("lightning_impl.fabric", (), marks=needs_lightning),
        pytest.param("lightning_impl", (), marks=needs_lightning),
        pytest.param("lightning_impl", ("--no-barebones",), marks=needs_lightning),
    ],
)
def test_your_own_workload_runs_in_every_arm(module, extra, corpus):
    args = ["--accelerator", "cpu", "--workload", CUSTOM, "--mlp-width", "16", "--steps", "2"]
    result = corpus.run(module, [*args, *extra, "--warmup-steps", "1"]).result  # forked
    assert result.workload.name == CUSTOM and result.workload.unit == "samples"
    assert result.model.startswith("MLP 64-16-16-10") and result.workload.options["mlp_width"] == 16
    module = (ROOT / "examples" / "custom_workload.py").read_bytes()  # the code that ran
    assert result.workload.module_digest == hashlib.sha256(module).hexdigest()


@needs_lightning
def test_your_own_workload_and_gpt_run_in_the_interleaved_mode(tmp_path):
    mode = ["--accelerator", "cpu", "--chunk-steps", "1", "--pairs", "2", "--runs", "2"]
    for name, workload in (("custom", [CUSTOM, "--mlp-width", "16"]), ("gpt", ["gpt"])):
        out = tmp_path / f"{name}.json"
        extra = ["--gpt-preset", "tiny", "--batch-size-per-device", "2"] if name == "gpt" else []
        proc = run_module(
            "lightning_impl.interleaved",
            [*mode, "--workload", *workload, *extra, "--output", str(out)],
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = load_interleaved(out)
        assert result.workload.name == (CUSTOM if name == "custom" else "gpt")
        assert result.model.startswith("MLP 64-16" if name == "custom" else "GPT-style decoder")
        assert result.arms[0].parameter_digest == result.arms[1].parameter_digest


@pytest.mark.parametrize(
    "module,extra",
    [
        ("native", ("--devices", "2")),  # the self-launching parent
        ("native", ("--check",)),
        pytest.param("lightning_impl.fabric", (), marks=needs_lightning),
        pytest.param("lightning_impl", (), marks=needs_lightning),
        pytest.param("lightning_impl", ("--check",), marks=needs_lightning),
        pytest.param("lightning_impl.interleaved", (), marks=needs_lightning),
    ],
)
def test_a_missing_workload_is_refused_in_one_line_by_every_arm(module, extra, tmp_path):
    out = tmp_path / "r.json"
    argv = ["--accelerator", "cpu", "--workload", "examples.nope:workload", *extra]
    line = refusal(module, [*argv, "--output", str(out)])
    assert line == (
        f"{module}: error: --workload examples.nope:workload: no module 'examples.nope' can be"
        " imported from here; run from the folder that holds it or add it to PYTHONPATH\n"
    )
    assert list(tmp_path.iterdir()) == []
