"""The arms table (common/arms.py): every arm declared once, and every reader reads it.

Its rows are consistent (runners, parents, roles, responsibilities); each arm's options make a
run that records that arm; experiment's --arms, the result schema, compare's order and the
comparisons it states come from it; a runner refuses another's --ablation, a second change,
and fp16 where an ablation would change the numerics, in one line before anything starts.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, TINY, lightning_installed, refusal

from common import arms, config
from common.result import Result
from compare.overheads import comparisons
from experiment import labelled_arms, plans
from lesson.page import responsibilities as lesson_rows
from lesson.source import read_runners


def test_every_row_names_a_runner_a_parent_before_it_and_a_known_responsibility():
    seen: list[str] = []
    for arm in arms.TABLE:
        assert arm.runner in arms.RUNNERS and arm.name not in seen
        assert arm.parent is None or arm.parent in seen, arm.name  # parents come first
        assert arm.responsibility is None or arm.responsibility in arms.RESPONSIBILITY
        assert arm.ablation == (arm.role != "main") and arm.change
        if arm.ablation:  # one change, to one runner, of its parent's runner
            assert len(arm.settings) == 1 and arm.parent is not None
            assert arms.ARMS[arm.parent].runner == arm.runner
        seen.append(arm.name)
    assert arms.MAIN == ("native", "fabric", "lightning", "lightning-services")
    # each responsibility Fabric takes over has an ablation that measures it
    parts = {a.responsibility for a in arms.TABLE if a.role == "part"}
    assert parts == {"launch", "wrapper", "precision", "step"}


@pytest.mark.parametrize("arm", arms.TABLE, ids=lambda a: a.name)
def test_each_arms_options_parse_to_a_run_that_records_that_arm(arm):
    cfg = config.parse(list(arm.options), arms.RUNNERS[arm.runner])
    values = {name: getattr(cfg, name) for name in arms.NEUTRAL}
    assert arms.arm_of(arm.runner, values) == arm.name
    arms.check_settings(arm.runner, values, "bf16")  # its own runner takes it


def test_a_stream_named_as_the_runners_own_changes_nothing():
    assert arms.arm_of("fabric", {"ddp_stream": "side"}) == "fabric"
    assert arms.arm_of("native", {"ddp_stream": "current"}) == "native"
    # a combination no row declares is no arm: its results are labelled by their runner
    assert arms.arm_of("lightning", {"ddp_stream": "current", "barebones": False}) is None


HOOK_POINTS = ("workload", "precision", "starts_ranks", "before_launch", "sigterm_broadcasts")


def test_every_ablation_row_has_one_hooks_class_where_its_runner_lives():
    """One class per --ablation row, in its runner's package, changing at least one hook point;
    every other row changes nothing through hooks (its option is read by every runner)."""
    if not lightning_installed():
        pytest.skip("Lightning extra not installed")
    import common.training  # noqa: F401  (registers native's)
    import lightning_impl.ablations  # noqa: F401  (registers Lightning's)

    for arm in arms.TABLE:
        value = dict(arm.settings).get("ablation")
        found = arms.hooks(None if value is None else str(value))
        if value is None:
            assert found is arms.NO_CHANGE, arm.name
            continue
        kind = type(found)
        assert kind.arm == arm.name and arms.HOOKS[arm.name] is found
        assert kind.__module__.split(".")[0] == (
            "common" if arm.runner == "native" else arm.module.split(".")[0]
        )
        assert any(getattr(kind, p) is not getattr(arms.Hooks, p) for p in HOOK_POINTS), arm.name
    assert set(arms.HOOKS) == {a.name for a in arms.TABLE if "ablation" in dict(a.settings)}
    with pytest.raises(TypeError, match="no --ablation row"):
        type("Stream", (arms.Hooks,), {"arm": "native-side-stream"})
    with pytest.raises(TypeError, match="has hooks already"):
        type("Again", (arms.Hooks,), {"arm": "fabric-raw-step"})


def test_the_marks_of_the_responsibilities_are_the_lessons_rows():
    marks = {m for r in arms.RESPONSIBILITIES for m in r.marks}
    assert marks <= set(lesson_rows(read_runners(ROOT)))


def test_experiment_result_schema_and_plans_read_the_table():
    for arm in arms.TABLE:  # an experiment's arm runs the table's module with its options
        argv = labelled_arms.LabelledArm(arm.name, arm.name).argv
        assert argv == ["-m", arm.module, *arm.options]
    assert [a.runner for a in labelled_arms.parse_arms("all")] == list(arms.MAIN)
    schema = json.loads((ROOT / "schema" / "result.schema.json").read_text())
    assert schema["properties"]["implementation"]["enum"] == list(arms.RUNNERS)
    assert "arm" in Result.model_fields
    plan = plans.find("responsibilities")
    one_gpu = [a.label for a in plan.arms]
    assert "fabric-native-launch" not in one_gpu and "lightning-no-sigterm" not in one_gpu
    assert all(arms.ARMS[label].one_rank is None for label in one_gpu)
    cpu = plans.find("responsibilities-cpu")
    assert {a.label for a in cpu.arms} >= set(one_gpu) | {"fabric-native-launch"}
    for arm in (*plan.arms, *cpu.arms):
        assert arm.label == arm.runner and arm.label in arms.ARMS


def test_compare_states_each_ablation_against_its_parent_and_each_runner_against_native():
    present = ["native", "fabric", "lightning", "fabric-raw-step", "lightning-no-sigterm"]
    assert comparisons(present, "native") == [
        ("fabric", "native"),
        ("lightning", "native"),
        ("fabric-raw-step", "fabric"),
        ("lightning-no-sigterm", "lightning"),
        ("lightning", "fabric"),
    ]
    # as before the table: the stream swap's arms against native, the services' steps
    swap = ["native", "lightning", "native-side-stream", "lightning-current-stream"]
    assert comparisons(swap, "native") == [(label, "native") for label in swap[1:]]
    assert comparisons(["native", "fabric", "lightning", "lightning-services"], "native")[3:] == [
        ("lightning", "fabric"),
        ("lightning-services", "lightning"),
    ]
    # an ablation whose parent did not run is compared with the baseline
    assert comparisons(["native", "fabric-raw-step"], "native") == [("fabric-raw-step", "native")]


@pytest.mark.parametrize(
    "module,options,expected",
    [
        (
            "native",
            ["--ablation", "raw-step"],
            "native: error: --ablation raw-step changes python -m lightning_impl.fabric (the arm"
            " fabric-raw-step); this program takes fp32-logits: leave it out or run"
            " lightning_impl.fabric",
        ),
        (
            "lightning_impl.fabric",
            ["--ablation", "torch-autocast", "--ddp-stream", "current"],
            "lightning_impl.fabric: error: --ablation torch-autocast with --ddp-stream: an arm"
            " hands back one responsibility at a time; leave one of them out",
        ),
        (
            "lightning_impl",
            ["--ablation", "no-sigterm", "--no-barebones"],
            "lightning_impl: error: --ablation no-sigterm with --no-barebones: an arm hands back"
            " one responsibility at a time; leave one of them out",
        ),
        (
            "lightning_impl.fabric",
            ["--ablation", "native-launch"],
            "lightning_impl.fabric: error: --ablation native-launch isolates nothing with one rank"
            f" ({arms.ARMS['fabric-native-launch'].one_rank}); give it 2 or more (--devices 2)",
        ),
        (
            "lightning_impl",
            ["--ablation", "no-sigterm"],
            "lightning_impl: error: --ablation no-sigterm isolates nothing with one rank"
            f" ({arms.ARMS['lightning-no-sigterm'].one_rank}); give it 2 or more (--devices 2)",
        ),
        (
            "lightning_impl.interleaved",
            ["--ablation", "fp32-logits"],
            "lightning_impl.interleaved: error: --ablation fp32-logits changes python -m native"
            " (the arm native-fp32-logits); this program takes none: leave it out or run native",
        ),
    ],
)
def test_a_runner_refuses_an_ablation_it_cannot_run_in_one_line(
    module, options, expected, tmp_path
):
    out = tmp_path / "r.json"
    given = ["--accelerator", "cpu"] if module.endswith("interleaved") else TINY  # no --steps
    line = refusal(module, [*given, "--devices", "1", *options, "--output", str(out)])
    assert line == expected + "\n", line
    assert not out.exists()


def test_an_ablation_that_would_change_fp16_numerics_is_refused_there():
    arms.check_settings("fabric", {"ablation": "raw-step"}, "bf16")
    with pytest.raises(Exception, match="--ablation raw-step keeps the numerics at fp32, tf32"):
        arms.check_settings("fabric", {"ablation": "raw-step"}, "fp16")
    arms.check_settings("native", {"ablation": "fp32-logits"}, "fp16")  # a cast: exact anywhere
