"""Grouping, pairing, repeats, mismatches, scaling and per-run flags, through the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from common.result import load_result
from compare.analysis import analyse
from compare.cli import main
from compare.model import Run, WorkloadMismatch, run_from
from compare.numerics import GPU_NOT_REPRODUCIBLE
from compare_factory import as_version_1, constant_steps, make_result, write
from stats import intervals


def report_of(capsys: pytest.CaptureFixture[str], *argv: Any) -> dict[str, Any]:
    """Run compare with --format json; the parsed report (fails on a non-zero exit)."""
    assert main([*map(str, argv), "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def error_of(capsys: pytest.CaptureFixture[str], *argv: Any) -> str:
    """Run compare expecting exit 2; its stderr."""
    assert main(list(map(str, argv))) == 2
    return capsys.readouterr().err


def test_native_and_lightning_of_one_workload_are_paired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native", world_size=2, seed=1))
    lt = write(tmp_path / "l.json", make_result("lightning", world_size=2, seed=2, median_ms=110.0))
    report = report_of(capsys, lt, n)  # order of files does not matter
    assert report["pairs"] == [
        {
            "world_size": 2,
            "arm": "lightning",
            "baseline": "native",
            "arm_files": ["l.json"],
            "baseline_files": ["n.json"],
            "numerics_identical": "yes",
        }
    ]
    [overhead] = report["overhead"]
    # One run a side: a point estimate, no interval, no slower/faster sentence.
    assert overhead["percent"] == pytest.approx(10.0, abs=1.0)
    assert not overhead["verdict_possible"] and not overhead["significant"]
    assert overhead["ci_low"] is overhead["ci_high"] is overhead["half_width"] is None
    assert overhead["min_detectable_percent"] is None
    assert overhead["no_verdict_reason"] == "the interval needs at least 2 runs a side"
    assert overhead["verdict"].endswith("no verdict: the interval needs at least 2 runs a side")
    assert "slower" not in overhead["verdict"] and "faster" not in overhead["verdict"]


def test_repeats_are_one_row_and_give_a_run_level_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [
        write(tmp_path / f"n{i}.json", make_result("native", median_ms=100.0 + i, seed=i))
        for i in range(3)
    ]
    files += [
        write(tmp_path / f"l{i}.json", make_result("lightning", median_ms=105.0 + i, seed=9 + i))
        for i in range(3)
    ]
    report = report_of(capsys, *files)
    assert [(row["arm"], row["runs"]) for row in report["table"]] == [
        ("native", 3),
        ("lightning", 3),
    ]
    assert len(report["runs"]) == 6
    [overhead] = report["overhead"]
    # Hsu's df (min runs a side - 1) keeps coverage with unequal counts and noise
    assert overhead["method"] == intervals.METHOD_WELCH
    assert overhead["estimator"] == "geometric mean of per-run median steps"
    assert overhead["arm_runs"] == overhead["baseline_runs"] == 3
    # medians about 100, 101, 102 against 105, 106, 107: about +5%, interval excluding 0
    assert (
        overhead["verdict_possible"]
        and overhead["significant"]
        and 0 < overhead["ci_low"] < 5 < overhead["ci_high"]
    )
    assert overhead["half_width"] == pytest.approx((overhead["ci_high"] - overhead["ci_low"]) / 2)
    assert overhead["verdict"].startswith(
        f"lightning is {overhead['percent']:.2f}% slower than native (95% CI"
    )
    assert "3 runs a side" in overhead["verdict"] and "smallest detectable" in overhead["verdict"]


def test_two_runs_a_side_are_the_fewest_that_give_an_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [
        write(
            tmp_path / f"{impl}{i}.json",
            make_result(impl, seed=i + (9 if impl == "lightning" else 0)),
        )
        for impl in ("native", "lightning")
        for i in range(2)
    ]
    [overhead] = report_of(capsys, *files)["overhead"]
    assert (
        overhead["verdict_possible"]
        and overhead["ci_low"] < overhead["percent"] < overhead["ci_high"]
    )
    # 2 runs a side: no honest smallest detectable size (fewer than 8 runs a side)
    assert overhead["min_detectable_percent"] is None
    assert overhead["min_detectable_note"] == "needs >= 8 runs a side (here 2)"


def test_one_run_on_a_side_gives_no_verdict_however_many_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native", steps=400, seed=1))
    ls = [
        write(
            tmp_path / f"l{i}.json",
            make_result("lightning", steps=400, seed=2 + i, median_ms=110.0),
        )
        for i in range(3)
    ]
    [overhead] = report_of(capsys, n, *ls)["overhead"]
    assert not overhead["verdict_possible"] and overhead["ci_low"] is None
    assert overhead["verdict"].endswith("no verdict: the interval needs at least 2 runs a side")


def test_overhead_over_steps_follows_the_slowest_rank_of_each_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Lightning's ranks take turns being slow: pooled, its times have a median of 110 ms; in
    # lockstep every step waits for the slow rank and takes 120 ms.
    n = write(
        tmp_path / "n.json",
        make_result("native", world_size=2, step_times=constant_steps(2, 100.0)),
    )
    turns = [[120.0 if (step + rank) % 2 else 100.0 for step in range(20)] for rank in range(2)]
    lt = write(tmp_path / "l.json", make_result("lightning", world_size=2, step_times=turns))
    [overhead] = report_of(capsys, n, lt)["overhead"]
    assert overhead["percent"] == pytest.approx(20.0)
    assert overhead["arm_median_ms"] == pytest.approx(120.0)


def test_workload_mismatch_exits_2_listing_every_differing_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native"))
    lt = write(
        tmp_path / "l.json",
        make_result(
            "lightning",
            precision="fp32",
            batch_size_per_device=64,
            config={"channels_last": True, "bucket_cap_mb": 50.0},
        ),
    )
    err = error_of(capsys, n, lt)
    assert err.count("\n") == 1 and err.startswith(
        "compare: error: the runs measure different workloads"
    )
    for difference in (
        "precision_resolved: native bf16, lightning fp32",
        "batch_size_per_device: native 32, lightning 64",
        "channels_last: native no, lightning yes",
        "bucket_cap_mb: native 25, lightning 50",
    ):
        assert difference in err
    assert "--allow-mismatch" in err


def test_allow_mismatch_compares_anyway_and_warns_of_each_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native"))
    lt = write(tmp_path / "l.json", make_result("lightning", config={"channels_last": True}))
    report = report_of(capsys, n, lt, "--allow-mismatch")
    assert len(report["overhead"]) == 1
    assert any("channels_last: native no, lightning yes" in w for w in report["warnings"])


def test_environment_difference_is_a_warning_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native", environment={"driver_version": "590.0"}))
    older = {"pytorch_version": "2.10.0"}
    lt = write(tmp_path / "l.json", make_result("lightning", environment=older))
    lt2 = write(tmp_path / "l2.json", make_result("lightning", seed=2))
    warnings = report_of(capsys, n, lt, lt2)["warnings"]
    # a version that differs within one arm is an environment difference, not what is compared
    assert (
        "environment differs: pytorch: native 2.11.0+cu130, lightning 2.10.0 | 2.11.0+cu130"
        in warnings
    )
    assert "environment differs: driver: native 590.0, lightning 580.1" in warnings


def versioned(
    tmp_path: Path, label: str, version: str, cache: bool = False, seed: int = 0, **overrides: Any
) -> Run:
    """A Lightning Trainer run labelled as an experiment labels a version arm."""
    r = make_result("lightning", world_size=2, seed=seed, **overrides)
    info = r.lightning.model_copy(update={"version": version, "autocast_cache_enabled": cache})
    r = r.model_copy(update={"lightning": info})
    path = write(tmp_path / f"{label}-r{seed}.json", r)
    return run_from(path, r, label=label)


def test_versions_that_differ_between_arms_are_compared_not_warned(tmp_path: Path) -> None:
    paths = [
        write(tmp_path / f"native-r{k}.json", make_result("native", world_size=2, seed=k))
        for k in (1, 2)
    ]
    native = [run_from(p, load_result(p)) for p in paths]
    old = [versioned(tmp_path, "lightning-2.5.1", "2.5.1", cache=True, seed=k) for k in (1, 2)]
    new = [versioned(tmp_path, "lightning-2.5.5", "2.5.5", seed=k) for k in (3, 4)]
    report = analyse([*native, *old, *new])
    assert not any("environment differs" in w.text for w in report.warnings)
    assert (
        "versions under test (one per arm): lightning: native 2.6.6,"
        " lightning-2.5.1 2.5.1, lightning-2.5.5 2.5.5"
    ) in report.notes
    rows = {row.field: row.values for row in report.header}
    assert rows["lightning"] == {
        "native": "2.6.6",
        "lightning-2.5.1": "2.5.1",
        "lightning-2.5.5": "2.5.5",
    }
    assert rows["pytorch"]["lightning-2.5.1"] == "2.11.0+cu130" and "python" in rows
    assert rows["autocast cast cache"] == {
        "native": "-",
        "lightning-2.5.1": "yes",
        "lightning-2.5.5": "no",
    }
    [cache] = [n for n in report.notes if "autocast cast cache" in n]
    assert cache.startswith(
        "numerics (not speed): lightning-2.5.1 ran with the Trainer's autocast cast cache on"
    )
    assert {(o.arm, o.baseline) for o in report.overhead} >= {
        ("lightning-2.5.1", "native"),
        ("lightning-2.5.5", "native"),
    }


def test_the_cast_cache_note_is_for_mixed_precision_only(tmp_path: Path) -> None:
    path = write(tmp_path / "n.json", make_result("native", world_size=2, precision="fp32"))
    old = versioned(tmp_path, "lightning-2.5.1", "2.5.1", cache=True, precision="fp32")
    report = analyse([run_from(path, load_result(path)), old])
    assert not any("autocast cast cache" in n for n in report.notes)


def test_version_arms_of_different_workloads_are_still_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "n.json", make_result("native", world_size=2))
    native = run_from(path, load_result(path))
    other = versioned(tmp_path, "lightning-2.5.5", "2.5.5", config={"channels_last": True})
    with pytest.raises(WorkloadMismatch, match="channels_last: native no, lightning-2.5.5 yes"):
        analyse([native, other])


def test_runs_of_different_code_are_warned_by_source_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native", environment={"source_digest": "a" * 64}))
    lt = write(
        tmp_path / "l.json", make_result("lightning", environment={"source_digest": "b" * 64})
    )
    old = write(tmp_path / "old.json", make_result("lightning", seed=2))  # recorded none: ignored
    warnings = report_of(capsys, n, lt, old)["warnings"]
    assert (
        f"environment differs: source digest: native {'a' * 12}, lightning {'b' * 12}" in warnings
    )
    assert report_of(capsys, n, old)["warnings"] == []


def test_weak_scaling_speedup_and_efficiency_are_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 100 images/GPU; 100 ms at 1 GPU = 1000 img/s, 125 ms at 2 = 1600, 160 ms at 4 = 2500.
    files = [
        write(
            tmp_path / f"n{w}.json",
            make_result(
                "native", world_size=w, batch_size_per_device=100, step_times=constant_steps(w, ms)
            ),
        )
        for w, ms in ((1, 100.0), (2, 125.0), (4, 160.0))
    ]
    scaling = report_of(capsys, *files)["scaling"]
    assert scaling["mode"] == "weak"
    got = [
        (r["world_size"], r["throughput"], r["speedup"], r["efficiency"]) for r in scaling["rows"]
    ]
    assert got == [
        pytest.approx(x)
        for x in [(1, 1000.0, 1.0, 1.0), (2, 1600.0, 1.6, 0.8), (4, 2500.0, 2.5, 0.625)]
    ]


def test_strong_scaling_speedup_and_efficiency_are_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Global batch 400: 400 ms at 1 GPU = 1000 img/s, 250 ms at 2 = 1600, 200 ms at 4 = 2000.
    files = [
        write(
            tmp_path / f"{impl}{w}.json",
            make_result(
                impl,
                world_size=w,
                batch_mode="fixed_global",
                global_batch_size=400,
                step_times=constant_steps(w, ms),
            ),
        )
        for impl in ("native", "lightning")
        for w, ms in ((1, 400.0), (2, 250.0), (4, 200.0))
    ]
    report = report_of(capsys, *files)
    assert report["scaling"]["mode"] == "strong"
    native = [
        (r["speedup"], r["efficiency"]) for r in report["scaling"]["rows"] if r["arm"] == "native"
    ]
    assert native == [pytest.approx(x) for x in [(1.0, 1.0), (1.6, 0.8), (2.0, 0.5)]]
    assert [o["world_size"] for o in report["overhead"]] == [1, 2, 4]  # an overhead at each size


def test_unpaired_world_size_is_warned_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n1 = write(tmp_path / "n1.json", make_result("native", world_size=1))
    n2 = write(tmp_path / "n2.json", make_result("native", world_size=2))
    l1 = write(tmp_path / "l1.json", make_result("lightning", world_size=1))
    report = report_of(capsys, n1, n2, l1)
    assert [row["world_size"] for row in report["table"]] == [1, 2, 1]
    report = report_of(
        capsys, n1, l1, write(tmp_path / "l2.json", make_result("lightning", world_size=2))
    )
    assert any(
        w.startswith("lightning at 2 GPU(s) (l2.json) has no native run at that size")
        for w in report["warnings"]
    )


def test_one_rank_twenty_percent_slower_is_flagged_with_its_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = constant_steps(4, 100.0)
    steps[2] = [120.0] * 20
    report = report_of(
        capsys, write(tmp_path / "n.json", make_result("native", world_size=4, step_times=steps))
    )
    assert report["slow_ranks"] == [
        {
            "file": "n.json",
            "arm": "native",
            "rank": 2,
            "hostname": "node0",
            "median_ms": 120.0,
            "run_median_ms": 100.0,
        }
    ]


def test_uniform_ranks_flag_no_slow_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_of(
        capsys, write(tmp_path / "n.json", make_result("native", world_size=8, seed=3))
    )
    assert report["slow_ranks"] == []


def test_host_bound_run_is_warned_with_its_busy_fraction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lt = write(tmp_path / "l.json", make_result("lightning", gpu_busy=0.62))
    [warning] = report_of(capsys, lt)["warnings"]
    assert warning.startswith(
        "l.json: host-bound (GPU busy 61.9% of the timed step)"
    )  # 62 ms of 100.2


def test_host_bound_compares_gpu_time_with_the_timed_step_not_the_profiled_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The factory's profiled steps take 100 ms with gpu_busy x 100 ms of GPU work. A timed
    # median of 75 ms with 70 ms of GPU work is 93% busy: the profiler made its steps longer.
    fast = write(tmp_path / "fast.json", make_result("lightning", gpu_busy=0.70, median_ms=75.0))
    report = report_of(capsys, fast)
    assert report["warnings"] == []
    slow = write(tmp_path / "slow.json", make_result("lightning", gpu_busy=0.70, median_ms=100.0))
    [warning] = report_of(capsys, slow)["warnings"]
    assert re.match(
        r"slow\.json: host-bound \(GPU busy 69\.\d% of the timed step\)", warning
    )  # 70 of 100.2 ms
    # A result that records the share is taken at its word.
    data = json.loads(fast.read_text())
    data["gpu_activity"].update(gpu_busy_ms_per_step=60.0, gpu_busy_share_of_timed_step=0.8)
    (tmp_path / "recorded.json").write_text(json.dumps(data))
    [warning] = report_of(capsys, tmp_path / "recorded.json")["warnings"]
    assert warning.startswith("recorded.json: host-bound (GPU busy 80.0% of the timed step)")
    # An older traced result (version 1, no share recorded) whose "kernels" outlast the wall
    # time (annotated ranges counted as GPU work) has no share to judge by: no warning rather
    # than a wrong one.
    data = as_version_1(load_result(slow))
    data["gpu_activity"].update(gpu_busy_share_of_timed_step=None)  # from the busy fraction
    (tmp_path / "older.json").write_text(json.dumps(data))
    [warning] = report_of(capsys, tmp_path / "older.json")["warnings"]
    assert re.match(r"older\.json: host-bound \(GPU busy 69\.\d% of the timed step\)", warning)
    data["gpu_activity"].update(gpu_ms_per_step=150.0)
    (tmp_path / "traced.json").write_text(json.dumps(data))
    assert report_of(capsys, tmp_path / "traced.json")["warnings"] == []


def test_a_run_with_a_diagnostic_switch_is_warned_as_no_measurement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = make_result("native", environment={"diagnostics": {"DDPBENCH_HOST_DELAY_US": "2000"}})
    clean = write(tmp_path / "n2.json", make_result("native", seed=1))
    report = report_of(capsys, write(tmp_path / "n.json", result), clean)
    assert report["warnings"] == [
        "n.json: ran with diagnostic switches (DDPBENCH_HOST_DELAY_US=2000):"
        " a diagnosis, not a measurement"
    ]
    # and the title (which heads the plot too) says so, per implementation
    assert report["title"].endswith(
        " · compile no · diagnostic: native DDPBENCH_HOST_DELAY_US=2000"
    )
    assert "diagnostic" not in report_of(capsys, clean)["title"]


def test_per_step_sigterm_sync_of_lightning_is_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lt = write(tmp_path / "l.json", make_result("lightning", world_size=2))
    notes = report_of(capsys, lt)["notes"]
    assert any(
        "broadcasts a SIGTERM flag and reads it with .item() every step" in note for note in notes
    )


@pytest.mark.parametrize(
    ("digest", "losses", "expected"),
    [
        ("ab" * 32, [2.5, 2.5], "yes"),
        ("cd" * 32, [2.5, 2.5], "no"),
        ("ab" * 32, [2.5, 2.6], "no"),
    ],
)
def test_numerics_are_identical_only_with_equal_digest_and_every_rank_loss(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    digest: str,
    losses: list[float],
    expected: str,
) -> None:
    n = write(tmp_path / "n.json", make_result("native", world_size=2))
    lt = write(
        tmp_path / "l.json",
        make_result("lightning", world_size=2, digest=digest, final_losses=losses),
    )
    assert report_of(capsys, n, lt)["pairs"][0]["numerics_identical"] == expected


def test_drifting_run_is_reported_not_in_steady_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Rank 1 sets the pace: 100 ms in the first half, 105 ms in the second (+5%); rank 0 is steady.
    drifting = [[100.0] * 20, [100.0] * 10 + [105.0] * 10]
    n = write(tmp_path / "n.json", make_result("native", world_size=2, step_times=drifting))
    lt = write(
        tmp_path / "l.json",
        make_result("lightning", world_size=2, step_times=constant_steps(2, 100.0)),
    )
    report = report_of(capsys, n, lt)
    assert [
        (s["file"], s["first_half_median_ms"], s["second_half_median_ms"])
        for s in report["steady_state"]
    ] == [("n.json", 100.0, 105.0), ("l.json", 100.0, 100.0)]
    assert report["steady_state"][0]["change_percent"] == pytest.approx(5.0)
    [warning] = [w for w in report["warnings"] if "steady state" in w]
    assert warning.startswith("n.json: not in steady state") and warning.endswith(
        "raise --warmup-steps"
    )
    assert "+5.0%" in warning


def test_a_drift_within_two_percent_is_steady(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native", step_times=[[100.0] * 10 + [101.9] * 10]))
    report = report_of(capsys, n)
    assert report["steady_state"][0]["change_percent"] == pytest.approx(1.9)
    assert not any("steady state" in w for w in report["warnings"])


def _numerics_pair(tmp_path: Path, accelerator: str, repeat_digest: str) -> list[Path]:
    """Two native repeats (the second with repeat_digest), a lightning run whose digest differs."""
    cfg = {"accelerator": accelerator}
    return [
        write(tmp_path / "n1.json", make_result("native", config=cfg)),
        write(tmp_path / "n2.json", make_result("native", config=cfg, digest=repeat_digest)),
        write(tmp_path / "l1.json", make_result("lightning", config=cfg, digest="cd" * 32)),
    ]


def test_different_numerics_on_gpu_are_explained_and_repeats_that_differ_too_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = report_of(capsys, *_numerics_pair(tmp_path, "gpu", repeat_digest="ef" * 32))["notes"]
    assert (
        "numerics (not speed): the arms end with different parameters at 1 GPU(s):"
        f" {GPU_NOT_REPRODUCIBLE}"
    ) in notes
    assert any(
        note.startswith(
            "numerics (not speed), lightning vs native at 1 GPU(s): repeats of one arm end with"
            " different parameters too (native: n1.json, n2.json)"
        )
        and "no evidence of a numerical difference" in note
        and "speed verdict above is unaffected" in note
        for note in notes
    )


def test_repeats_that_agree_while_native_and_lightning_differ_are_pointed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = report_of(capsys, *_numerics_pair(tmp_path, "gpu", repeat_digest="ab" * 32))["notes"]
    assert any(
        note.startswith(
            "numerics (not speed), lightning vs native at 1 GPU(s): repeats of one arm are"
            " bit-identical (native: n1.json, n2.json)"
        )
        for note in notes
    )


def test_different_numerics_on_cpu_get_no_gpu_excuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = report_of(capsys, *_numerics_pair(tmp_path, "cpu", repeat_digest="ab" * 32))["notes"]
    assert not any(GPU_NOT_REPRODUCIBLE in note for note in notes)


def test_same_numerics_get_no_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = write(tmp_path / "n.json", make_result("native"))
    lt = write(tmp_path / "l.json", make_result("lightning"))
    assert not any(
        "numerics" in note or "repeats" in note for note in report_of(capsys, n, lt)["notes"]
    )


def test_unsynchronised_parameters_are_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = write(tmp_path / "n.json", make_result("native", parameters_synchronized=False))
    assert any("NOT synchronised" in w for w in report_of(capsys, n)["warnings"])
