"""Each ablation arm on 2 gloo ranks, bf16 autocast on the CPU, both workloads: it ends bit for
bit with its parent's parameters and losses, records its arm, and changes what it says it
changes, read from rank 0's profile of the timed steps (--pyprofile: which Lightning code ran,
how often).

    fabric-raw-step        no _FabricModule.forward, Fabric.backward or _FabricOptimizer.step
    fabric-torch-autocast  no MixedPrecision.convert_input / convert_output
    lightning-no-sigterm   no torch.distributed.broadcast in the loop (the Trainer: one a step)
    native-fp32-logits     one more Tensor.to a step than native (the outputs' cast)
    fabric-native-launch   every rank started by native's launcher (a `launch` phase on each)
    fabric-current-stream, native-side-stream: nothing to change without CUDA streams (their
                           GPU check: tests/test_gpu.py, one stream or two in a trace)

The runs are the session's corpus (tests/conftest.py): forked from one warm interpreter, as
`python -m experiment --launch fork` runs them, since a forked run is bit for bit a fresh one.
fabric-native-launch changes how the ranks start, which only a fresh start shows: it runs
fresh, beside the fresh Fabric run of tests/test_end_to_end.py (the corpus makes it once).
"""

from __future__ import annotations

import pytest
from conftest import TINY, lightning_installed

from benchmarks import host_profile
from common.arms import ARMS, TABLE
from common.result import Result

pytestmark = pytest.mark.slow
STEPS = 3
CPU = [
    *("--accelerator", "cpu", "--devices", "2", "--precision", "bf16"),
    *("--batch-size-per-device", "2", "--warmup-steps", "2", "--steps", str(STEPS)),
]
WORKLOADS = {
    "image": ["--arch", "squeezenet1_1", "--image-size", "32", "--num-classes", "10"],
    "gpt": ["--workload", "gpt", "--gpt-preset", "tiny"],
}
# Every row of the table but the Trainer's services (files written), the stream check and
# native's launch (started fresh below: a forked run has no launcher of its own)
ARMS_RUN = tuple(
    a.name for a in TABLE if a.role != "check" and a.responsibility not in ("services", "launch")
)
FRESH = [*TINY, "--devices", "2"]  # tests/test_end_to_end.py's fresh runs


@pytest.fixture(scope="module", params=list(WORKLOADS))
def runs(request, corpus) -> dict[str, tuple[Result, dict]]:
    """Every arm of ARMS_RUN on one workload: its result and rank 0's profile stats."""
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    found = {}
    for name in ARMS_RUN:
        arm = ARMS[name]
        options = [*CPU, *WORKLOADS[request.param], *arm.options]
        run = corpus.run(arm.module, [*options, "--pyprofile", "{folder}/profile.pstats"])
        stats, steps = host_profile.load(str(run.folder / "profile.pstats"))
        assert steps == STEPS
        found[name] = (run.result, stats)
    return found


@pytest.fixture(scope="module")
def launched(corpus) -> dict[str, Result]:
    """Fabric and fabric-native-launch started fresh (2 gloo ranks, fp32)."""
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    return {
        name: corpus.run(ARMS[name].module, [*FRESH, *ARMS[name].options], fresh=True).result
        for name in ("fabric", "fabric-native-launch")
    }


def calls(stats: dict, func: str, file_end: str = "") -> int:
    """How often `func` (defined in a file ending with file_end) ran in the timed steps."""
    return sum(
        nc
        for (file, _, name), (_, nc, *_) in stats.items()
        if name == func and file.endswith(file_end)
    )


def test_every_ablation_ends_bit_identical_to_its_parent(runs):
    for name, (result, _) in runs.items():
        assert result.arm == name and result.environment.diagnostics == {
            "--pyprofile": result.config["pyprofile"]
        }
        parent = ARMS[name].parent
        if parent is None:
            continue
        other = runs[parent][0]
        assert result.parameter_digest == other.parameter_digest, name
        assert [r.final_loss for r in result.ranks] == [r.final_loss for r in other.ranks], name
        assert result.parameters_synchronized, name


def test_fabric_raw_step_leaves_out_fabrics_wrappers(runs):
    fabric, raw = runs["fabric"][1], runs["fabric-raw-step"][1]
    for func, where in (
        ("forward", "fabric/wrappers.py"),  # _FabricModule.forward
        ("backward", "fabric/fabric.py"),  # Fabric.backward
        ("step", "fabric/wrappers.py"),  # _FabricOptimizer.step
    ):
        assert calls(fabric, func, where) == STEPS and calls(raw, func, where) == 0, func
    assert calls(raw, "__call__", "lightning_impl/ablations.py") == STEPS  # RawModule
    # what it keeps: the precision's casts around the forward
    assert calls(raw, "convert_output", "precision/amp.py") == STEPS


def test_fabric_torch_autocast_leaves_out_the_precision_plugins_casts(runs):
    fabric, plain = runs["fabric"][1], runs["fabric-torch-autocast"][1]
    for func in ("convert_input", "convert_output"):
        assert calls(fabric, func, "precision/amp.py") == STEPS
        assert calls(plain, func, "precision/amp.py") == 0
    assert calls(plain, "forward", "fabric/wrappers.py") == STEPS  # the wrapper stays


def test_lightning_no_sigterm_leaves_out_the_loops_broadcast(runs):
    trainer, quiet = runs["lightning"][1], runs["lightning-no-sigterm"][1]
    # one a step, at its start: the first timed step's comes before the profile starts
    assert calls(trainer, "broadcast", "distributed_c10d.py") == STEPS - 1
    assert calls(quiet, "broadcast", "distributed_c10d.py") == 0


def test_native_fp32_logits_casts_the_outputs_once_a_step(runs):
    native, cast = runs["native"][1], runs["native-fp32-logits"][1]
    assert calls(cast, "loss", "common/training.py") == STEPS
    extra = calls(cast, "<method 'to' of 'torch._C.TensorBase' objects>") - calls(
        native, "<method 'to' of 'torch._C.TensorBase' objects>"
    )
    assert extra == STEPS


def test_fabric_native_launch_starts_every_rank_by_natives_launcher(launched):
    own, native = launched["fabric"], launched["fabric-native-launch"]
    assert native.arm == "fabric-native-launch" and native.process.kind == "fresh"
    # Fabric's launcher is rank 0: it starts the others; native's parent starts them all
    assert [r.phase_seconds.launch is not None for r in own.ranks] == [False, True]
    assert all(r.phase_seconds.launch is not None for r in native.ranks)
    # ... and the numbers stay its parent's
    assert native.parameter_digest == own.parameter_digest and native.parameters_synchronized
    assert [r.final_loss for r in native.ranks] == [r.final_loss for r in own.ranks]
