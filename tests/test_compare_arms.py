"""Arms and labels: experiment folders with manifest.json, several arms, --baseline, A/A labels,
the original scripts' own group; and the loader's refusals (inconsistent summaries, nesting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.arms import ARMS
from common.result import LightningInfo, write_result
from compare.cli import main
from compare_factory import make_result, write
from stats import intervals

ORIGINAL = Path(__file__).resolve().parent / "data" / "original" / "native-h200-b256.json"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _experiment(
    folder: Path,
    arms: dict[str, tuple[str, float]],
    runs: int = 3,
    failed: str | None = None,
    baseline: str = "native",
) -> Path:
    """An experiment folder as `python -m experiment` writes it: results/, manifest.json."""
    (folder / "results").mkdir(parents=True)
    entries = []
    for i, (label, (impl, ms)) in enumerate(arms.items()):
        for k in range(1, runs + 1):
            rel = f"results/{label}-r{k}.json"
            ok = not (label == failed and k == runs)
            if ok:
                result = make_result(impl, median_ms=ms + k * 0.1, seed=len(entries))
                if label in ARMS:  # the arm the run is, as a result of it records
                    result = result.model_copy(update={"arm": label})
                write(folder / rel, result)
            entries.append(
                {
                    "index": len(entries) + 1,
                    "block": k,
                    "position": i + 1 if k % 2 else len(arms) - i,  # ABBA
                    "label": label,
                    "arm": impl,
                    "repeat": k,
                    "command": [],
                    "result": rel,
                    "log": f"logs/{label}-r{k}.log",
                    "status": "ok" if ok else "failed",
                    "exit_status": 0 if ok else 1,
                    "started_utc": "",
                    "finished_utc": "",
                    "seconds": 1.0,
                }
            )
    manifest = {
        "manifest_version": 1,
        "experiment": None,
        "created_utc": "",
        "command": [],
        "baseline": baseline,
        "arms": [{"label": label, "arm": impl, "argv": []} for label, (impl, _) in arms.items()],
        "runner_options": [],
        "runs": entries,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_an_a_to_a_folder_compares_native_b_with_native_by_label(tmp_path: Path, capsys) -> None:
    folder = _experiment(
        tmp_path / "aa", {"native": ("native", 100.0), "native-b": ("native", 100.0)}
    )
    report = _json(capsys, str(folder))
    assert report["labels"] == ["native", "native-b"] and report["baseline"] == "native"
    [o] = report["overhead"]
    assert (o["arm"], o["baseline"], o["arm_runs"], o["baseline_runs"]) == (
        "native-b",
        "native",
        3,
        3,
    )
    assert o["verdict_possible"]


def test_failed_runs_of_a_manifest_are_left_out(tmp_path: Path, capsys) -> None:
    folder = _experiment(
        tmp_path / "e",
        {"native": ("native", 100.0), "lightning": ("lightning", 102.0)},
        failed="lightning",
    )
    [o] = _json(capsys, str(folder))["overhead"]
    # paired by block, so the block whose lightning run failed is dropped and said
    assert (o["arm_runs"], o["baseline_runs"], o["blocks"]) == (2, 2, 2)
    assert len(o["dropped_blocks"]) == 1 and o["method"] == intervals.METHOD_BLOCKS
    assert "2 runs a side" in o["verdict"]


def test_four_arms_give_each_vs_baseline_and_the_framework_steps(tmp_path: Path, capsys) -> None:
    folder = _experiment(
        tmp_path / "e",
        {
            "native": ("native", 100.0),
            "fabric": ("fabric", 101.0),
            "lightning": ("lightning", 102.0),
            "lightning-services": ("lightning", 104.0),
        },
    )
    report = _json(capsys, str(folder))
    pairs = [(o["arm"], o["baseline"]) for o in report["overhead"]]
    assert pairs == [
        ("fabric", "native"),
        ("lightning", "native"),
        ("lightning-services", "native"),
        ("lightning", "fabric"),
        ("lightning-services", "lightning"),
    ]
    assert [row["arm"] for row in report["table"]] == [
        "native",
        "fabric",
        "lightning",
        "lightning-services",
    ]
    assert main([str(folder), "--plot", str(tmp_path / "four.png")]) == 0
    assert (tmp_path / "four.png").stat().st_size > 10_000


def test_baseline_option_picks_the_arm_others_are_compared_with(tmp_path: Path, capsys) -> None:
    folder = _experiment(
        tmp_path / "e",
        {
            "native": ("native", 100.0),
            "fabric": ("fabric", 101.0),
            "lightning": ("lightning", 102.0),
        },
    )
    report = _json(capsys, str(folder), "--baseline", "fabric")
    assert [(o["arm"], o["baseline"]) for o in report["overhead"]] == [
        ("native", "fabric"),
        ("lightning", "fabric"),
    ]


def test_unknown_baseline_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    folder = _experiment(
        tmp_path / "e", {"native": ("native", 100.0), "lightning": ("lightning", 102.0)}
    )
    assert main([str(folder), "--baseline", "nativ"]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "--baseline nativ: no run has that label; the labels are native, lightning" in err
    )


def test_a_folder_without_manifest_is_refused(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    assert "is a folder without manifest.json" in capsys.readouterr().err


def test_files_are_labelled_by_arm_and_services_apart(tmp_path: Path, capsys) -> None:
    services = make_result("lightning", seed=3)
    services = services.model_copy(
        update={
            "lightning": LightningInfo(
                version="2.6.6",
                barebones=False,
                per_step_sigterm_sync=False,
                autocast_cache_enabled=False,
            )
        }
    )
    files = [
        write(tmp_path / "n.json", make_result("native", seed=1)),
        write(tmp_path / "f.json", make_result("fabric", seed=2)),
        write(tmp_path / "s.json", services),
    ]
    report = _json(capsys, *map(str, files))
    assert report["labels"] == ["native", "fabric", "lightning-services"]
    assert {run["file"].rsplit("/", 1)[-1]: run["arm"] for run in report["runs"]} == {
        "n.json": "native",
        "f.json": "fabric",
        "s.json": "lightning-services",
    }


def test_original_script_runs_are_never_pooled_with_the_suite(tmp_path: Path, capsys) -> None:
    suite = [
        write(tmp_path / f"n{i}.json", make_result("native", batch_size_per_device=256, seed=i))
        for i in range(2)
    ]
    report = _json(capsys, str(ORIGINAL), *map(str, suite))
    rows = {row["arm"]: row["runs"] for row in report["table"]}
    assert rows == {"native": 2, "native (original script)": 1}
    [o] = report["overhead"]
    assert (o["arm"], o["baseline"]) == ("native (original script)", "native")
    assert o["estimator"].startswith("geometric mean of per-run wall-clock")


def test_arm_and_diagnostic_options_in_config_are_not_workload(tmp_path: Path, capsys) -> None:
    diag = {
        "barebones": True,
        "ddp_stream": "current",
        "host_delay_us": 2000,
        "pyprofile": "p.prof",
        "trace": "t.json",
    }
    n = write(tmp_path / "n.json", make_result("native", seed=1))
    lt = write(
        tmp_path / "l.json",
        make_result(
            "lightning",
            seed=2,
            config=diag,
            environment={"diagnostics": {"--ddp-stream": "current"}},
        ),
    )
    report = _json(capsys, str(n), str(lt))
    assert any(
        "ran with diagnostic switches (--ddp-stream=current)" in w for w in report["warnings"]
    )


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("step_time_ms.median", ("step_time_ms", "median")),
        ("samples_per_second_median", ("samples_per_second_median",)),
        ("milliseconds_per_step", ("milliseconds_per_step",)),
        ("ranks.0.step_time_ms.p95", ("ranks", 0, "step_time_ms", "p95")),
    ],
)
def test_a_summary_that_disagrees_with_its_step_times_is_refused(
    tmp_path: Path, capsys, field, path
) -> None:
    good = write(tmp_path / "n.json", make_result("native", seed=1))
    data = json.loads(write(tmp_path / "l.json", make_result("lightning", seed=2)).read_text())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = target[path[-1]] * 1.01
    (tmp_path / "l.json").write_text(json.dumps(data))
    assert main([str(good), str(tmp_path / "l.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"field {field} is" in err and "disagrees with the steps" in err


def test_huge_step_times_beside_an_ordinary_summary_are_refused(tmp_path: Path, capsys) -> None:
    data = json.loads(write(tmp_path / "l.json", make_result("lightning", seed=2)).read_text())
    data["ranks"][0]["step_times_ms"] = [1e308] * len(data["ranks"][0]["step_times_ms"])
    (tmp_path / "l.json").write_text(json.dumps(data))
    assert main([str(tmp_path / "l.json")]) == 2
    assert "step_times_ms" in capsys.readouterr().err


def test_a_summary_within_float_rounding_is_accepted(tmp_path: Path, capsys) -> None:
    data = json.loads(write(tmp_path / "l.json", make_result("lightning", seed=2)).read_text())
    data["step_time_ms"]["median"] *= 1 + 1e-12
    (tmp_path / "l.json").write_text(json.dumps(data))
    assert main([str(tmp_path / "l.json"), "--format", "json"]) == 0


def test_100000_nested_brackets_give_one_line_not_a_recursion_traceback(
    tmp_path: Path, capsys
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply" in err and "Traceback" not in err


def test_a_label_naming_an_arm_of_the_table_must_be_the_arm_the_result_records(
    tmp_path: Path, capsys
) -> None:
    """A Fabric run under an ablation's label was read as that ablation (a part of +0.00):
    refused in one line naming the file, the label and the arm the result records."""
    folder = _experiment(
        tmp_path / "e", {"native": ("native", 100.0), "fabric-raw-step": ("fabric", 101.0)}
    )
    plain = make_result("fabric", median_ms=101.1, seed=1).model_copy(update={"arm": "fabric"})
    write_result(plain, folder / "results" / "fabric-raw-step-r1.json", overwrite=True)
    assert main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fabric-raw-step-r1.json: labelled fabric-raw-step in" in err
    assert "but the result records the arm fabric" in err


def test_an_older_result_is_the_arm_its_recorded_options_make(tmp_path: Path, capsys) -> None:
    """Results from before the `arm` field: native with --ddp-stream side is native-side-stream
    (the committed results/h200/ddp-stream-swap folders hold such runs)."""
    folder = _experiment(
        tmp_path / "e", {"native": ("native", 100.0), "native-side-stream": ("native", 101.0)}
    )
    for k in (1, 2, 3):
        r = make_result("native", median_ms=101.0 + k * 0.1, seed=10 + k)
        side = r.model_copy(update={"config": {**r.config, "ddp_stream": "side"}})
        write_result(side, folder / "results" / f"native-side-stream-r{k}.json", overwrite=True)
    report = _json(capsys, str(folder))
    assert report["labels"] == ["native", "native-side-stream"]
    r = make_result("native", median_ms=101.0, seed=20)  # no arm recorded, its options plain
    write_result(r, folder / "results" / "native-side-stream-r1.json", overwrite=True)
    assert main([str(folder)]) == 2
    assert "but the result records the arm native;" in capsys.readouterr().err
