"""Bad inputs give exit 2 and one line naming the file; original-script results are accepted."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from compare.cli import main
from compare_factory import make_result, write

ROOT = Path(__file__).resolve().parents[1]
ORIGINALS = Path(__file__).resolve().parent / "data" / "original"
NATIVE_ORIGINAL = ORIGINALS / "native-h200-b256.json"
LIGHTNING_ORIGINAL = ORIGINALS / "lightning-h200-b256.json"


def _valid(path: Path) -> dict:
    """A valid result as a dict, to break on purpose."""
    write(path, make_result("native"))
    data = json.loads(path.read_text())
    path.unlink()
    return data


def _truncated(path: Path) -> None:
    write(path, make_result("native"))
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def _wrong_types(path: Path) -> None:
    data = _valid(path)
    data["world_size"] = "two"
    path.write_text(json.dumps(data))


def _unknown_version(path: Path) -> None:
    data = _valid(path)
    data["schema_version"] = 99
    path.write_text(json.dumps(data))


def _empty_steps(path: Path) -> None:
    data = _valid(path)
    data["ranks"][0]["step_times_ms"] = []
    path.write_text(json.dumps(data))


def _nan_literal(path: Path) -> None:
    data = _valid(path)
    data["samples_per_second"] = "__NAN__"
    path.write_text(json.dumps(data).replace('"__NAN__"', "NaN"))


def _zero_step_time(path: Path) -> None:
    data = _valid(path)
    data["ranks"][0]["step_times_ms"][3] = 0.0
    path.write_text(json.dumps(data))


def _unaligned_ranks(path: Path) -> None:
    data = _valid(path)
    data["ranks"][0]["step_times_ms"].pop()
    path.write_text(json.dumps(data))


def _missing(path: Path) -> None:
    """Leave no file at all."""


@pytest.mark.parametrize(
    ("breaks", "reason"),
    [
        (_truncated, "not valid JSON"),
        (_wrong_types, "field world_size"),
        (_unknown_version, "schema_version 99 is not supported"),
        (_empty_steps, "field ranks.0.step_times_ms"),
        (_nan_literal, "NaN is not allowed"),
        (_zero_step_time, "rank 0 has a step time <= 0 ms"),
        (_unaligned_ranks, "rank 0 has 49 step times in step_times_ms for measured_steps 50"),
        (_missing, "no such file"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], breaks: Callable[[Path], None], reason: str
) -> None:
    good = write(tmp_path / "good.json", make_result("lightning"))
    bad = tmp_path / "bad.json"
    breaks(bad)
    assert main([str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"compare: error: {bad}: ")
    assert reason in captured.err
    assert "Traceback" not in captured.err


def test_missing_file_from_the_shell_gives_exit_2_and_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "compare", str(tmp_path / "nope.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"compare: error: {tmp_path / 'nope.json'}: no such file\n"


def test_verbose_adds_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.json"), "--verbose"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_the_same_file_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = str(write(tmp_path / "n.json", make_result("native")))
    assert main([n, n]) == 2
    assert "given more than once" in capsys.readouterr().err


def test_original_script_results_compare_and_are_labelled_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [str(shutil.copy(p, tmp_path)) for p in (NATIVE_ORIGINAL, LIGHTNING_ORIGINAL)]
    assert main(files) == 0
    text = capsys.readouterr().out
    assert "native (original script)" in text and "lightning (original script)" in text
    assert "wall-clock mean on both sides" in text and "no verdict: the interval needs" in text
    steady = text[text.index("Steady state: first vs second half") :].splitlines()
    assert steady[3].split() == ["native-h200-b256.json", "(original", "script)", "-", "-", "-"]
    assert main([*files, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [overhead] = report["overhead"]
    assert overhead["ci_low"] is None and overhead["estimator"].startswith(
        "geometric mean of per-run wall-clock"
    )
    assert (overhead["arm"], overhead["baseline"]) == (
        "lightning (original script)",
        "native (original script)",
    )
    assert overhead["percent"] == pytest.approx((104.98112488000004 / 105.25984238000035 - 1) * 100)
    assert all(run["name"].endswith("(original script)") for run in report["runs"])
    assert report["pairs"][0]["numerics_identical"] == "no"  # their final losses differ
    assert main([*files, "--format", "csv"]) == 0
    assert pd.read_csv(io.StringIO(capsys.readouterr().out))["original_script"].all()


def test_original_result_pairs_with_a_result_of_this_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lt = write(tmp_path / "l.json", make_result("lightning", batch_size_per_device=256, steps=50))
    assert main([str(NATIVE_ORIGINAL), str(lt), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["overhead"][0]["estimator"].startswith("geometric mean of per-run wall-clock")
    assert report["overhead"][0]["baseline"] == "native (original script)"
    assert report["table"][0]["arm"] == "native (original script)"


def test_importing_compare_imports_neither_torch_nor_lightning() -> None:
    code = (
        "import compare.cli, compare.figures, sys; "
        "assert 'torch' not in sys.modules and 'lightning' not in sys.modules, 'imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_files_of_the_same_name_are_told_apart_by_their_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from compare.load import load_runs

    src = Path(__file__).resolve().parent.parent / "results" / "h200" / "precisions"
    paths = []
    for folder, impl in (("a", "native"), ("b", "native")):
        (tmp_path / folder).mkdir()
        target = tmp_path / folder / "run.json"
        target.write_text((src / f"{impl}-bf16-r{1 if folder == 'a' else 2}.json").read_text())
        paths.append(target)
    assert [r.file for r in load_runs(paths)] == ["a/run.json", "b/run.json"]
