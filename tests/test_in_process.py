"""The in-process plan's folder (experiment/in_process.py) and compare on it (compare/cli.py):
a manifest per variant folder through common.manifest, a log per repeat, a failed repeat
recorded with no result, a stopped plan keeping its record; compare reading such a folder or
its files as their own question in its formats, and refusing to mix them with separate runs.

The repeats are tests/experiment_fake_runner.py (it writes tests/data/interleaved.json for
lightning_impl.interleaved), so nothing here starts torch."""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

from common.manifest import (
    INTERLEAVED_RUNNER,
    Manifest,
    ManifestArm,
    ManifestRun,
    load_manifest,
)
from common.result import ResultError
from compare.cli import main as compare_main
from compare_factory import make_result, write

FAKE = ROOT / "tests" / "experiment_fake_runner.py"
DATA = ROOT / "tests" / "data" / "interleaved.json"
VARIANT = "fabric-vs-native"


def plan(out: Path, *extra: str, wait: bool = True, **env: str):
    """python -m experiment --plan in-process --variant fabric-vs-native with the fake runner."""
    cmd = [sys.executable, "-m", "experiment", "--plan", "in-process", "--variant", VARIANT]
    e = clean_env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE), **env)
    cmd += ["--out", str(out), *extra, "--", "--devices", "1"]
    if not wait:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    return subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A plan folder of three repeats, the second failing (exit status 3)."""
    out = tmp_path_factory.mktemp("plan") / "exp"
    proc = plan(out, "--repeats", "3", FAKE_FAIL="interleaved-r2")
    assert proc.returncode == 1, proc.stderr
    assert "repeat 2 failed (exit status 3" in proc.stdout and "it left no result" in proc.stdout
    return out


def test_each_variant_folder_has_its_manifest_logs_results_and_report(folder):
    here = folder / VARIANT
    assert sorted(p.name for p in folder.iterdir()) == [VARIANT]
    manifest = load_manifest(here / "manifest.json")  # the model's validation: a valid manifest
    assert manifest.interleaved and manifest.experiment == f"in-process/{VARIANT}"
    assert manifest.command[:4] == ["python", "-m", "experiment", "--plan"]
    (arm,) = manifest.arms
    assert (arm.label, arm.runner) == (VARIANT, INTERLEAVED_RUNNER)
    assert arm.argv[:2] == ["-m", "lightning_impl.interleaved"] and "--arm" in arm.argv
    assert manifest.runner_options == ["--devices", "1"]
    assert [(r.index, r.block, r.repeat, r.status) for r in manifest.runs] == [
        (1, 1, 1, "ok"),
        (2, 2, 2, "failed"),
        (3, 3, 3, "ok"),
    ]
    ok, failed, _ = manifest.runs
    assert ok.result == "results/interleaved-r1.json" and ok.exit_status == 0
    assert ok.command[-1] == str((here / ok.result).resolve())
    # the failed repeat: recorded with its exit status and log, and no result anywhere
    assert failed.result is None and failed.exit_status == 3
    assert not (here / "results" / "interleaved-r2.json").exists()
    assert sorted(p.name for p in (here / "results").iterdir()) == [
        "interleaved-r1.json",
        "interleaved-r3.json",
    ]
    assert "injected failure" in (here / failed.log).read_text()
    assert all(r.started_utc <= r.finished_utc and r.seconds >= 0 for r in manifest.runs)
    text = " ".join((here / "report.txt").read_text().split())  # its prose, unwrapped
    assert text.startswith("resnet18 on ") and "fabric vs native" in text
    # two processes: repeat 1 built the baseline first, repeat 3 the arm (the plan's order)
    assert "6 run(s) in 2 process(es)" in text
    assert "no verdict: 1 process(es) built the baseline first and 1 the arm first" in text
    assert (here / "report.md").read_text().startswith("# resnet18 on ")


def test_six_processes_by_default_the_build_order_alternated_each_with_its_own_seed(tmp_path):
    """The plan's schedule: 6 processes, built baseline-first, arm-first, arm-first,
    baseline-first, ...; each with a fresh order seed on its command line (so the process can be
    run again exactly), which its result records; the verdict comes from the processes with the
    build-order term, and the report says how much the loop built second gained."""
    out = tmp_path / "exp"
    proc = plan(out, FAKE_BUILD_EFFECT="0.02")
    assert proc.returncode == 0, proc.stderr
    here = out / VARIANT
    runs = load_manifest(here / "manifest.json").runs
    assert len(runs) == 6 and all(r.status == "ok" for r in runs)
    orders, seeds = [], []
    for run in runs:
        cmd = run.command
        orders.append(cmd[cmd.index("--build-first") + 1])
        seeds.append(int(cmd[cmd.index("--order-seed") + 1]))
        doc = json.loads((here / run.result).read_text())
        assert doc["order_seed"] == seeds[-1]
        assert doc["built_first"] == ("native" if orders[-1] == "baseline" else "fabric")
    assert orders == ["baseline", "arm", "arm", "baseline", "baseline", "arm"]
    assert len(set(seeds)) == 6
    assert f"repeat 2/6: a process building the arm's loop first, order seed {seeds[1]}" in (
        proc.stdout
    )
    text = " ".join((here / "report.txt").read_text().split())
    assert "(6 process(es): 3 built native first, 3 fabric first; 95% CI" in text
    assert "t with df 4)" in text
    gained = re.search(r"build order: the loop built second ran (\S+)% faster", text)
    assert gained and abs(float(gained[1]) - 100 * math.expm1(0.01)) < 0.2, text
    low, high = map(float, re.findall(r"its gain ([+-][\d.]+)%\.\.([+-][\d.]+)% at the", text)[0])
    assert low < float(gained[1]) < high  # its interval, the estimate's standard error
    assert compare_main(["--format", "json", str(here)]) == 0


def test_options_the_plan_sets_per_process_are_refused_before_any_run(tmp_path):
    for flag in ("--build-first", "--order-seed"):
        out = tmp_path / flag.strip("-")
        cmd = [sys.executable, "-m", "experiment", "--plan", "in-process", "--out", str(out)]
        proc = subprocess.run(
            [*cmd, "--", "--devices", "1", flag, "arm" if "build" in flag else "3"],
            cwd=ROOT,
            env=clean_env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"{flag}: the in-process plan sets it for each process" in proc.stderr
        assert not out.exists()


def test_a_repeat_that_fails_after_writing_keeps_no_result(tmp_path):
    out = tmp_path / "exp"
    proc = plan(out, "--repeats", "1", FAKE_LATE_FAIL="interleaved-r1")
    assert proc.returncode == 1
    here = out / VARIANT
    (run,) = load_manifest(here / "manifest.json").runs
    assert run.status == "failed" and run.result is None and run.exit_status == 1
    assert list((here / "results").iterdir()) == [] and not (here / "report.txt").exists()
    assert "removed interleaved-r1.json" in (here / "logs" / "interleaved-r1.log").read_text()
    # compare finds nothing to read and says where to look
    assert compare_main([str(here)]) == 2


def test_a_stopped_plan_keeps_the_repeats_recorded_so_far(tmp_path):
    out = tmp_path / "exp"
    proc = plan(out, "--repeats", "3", wait=False, FAKE_HANG="interleaved-r2")
    log = out / VARIANT / "logs" / "interleaved-r2.log"
    deadline = time.monotonic() + 60
    while not (log.is_file() and "fake runner" in log.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert b"stopped by SIGTERM" in err and b"Traceback" not in err
    runs = load_manifest(out / VARIANT / "manifest.json").runs
    assert [(r.status, r.result) for r in runs] == [
        ("ok", "results/interleaved-r1.json"),
        ("failed", None),
    ]
    assert not (out / VARIANT / "results" / "interleaved-r2.json").exists()


def test_a_folder_in_use_is_refused_before_any_run(tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "keep").write_text("mine")
    proc = plan(out, "--repeats", "1")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "is not empty" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_a_manifest_never_mixes_interleaved_and_separate_runners():
    arm = ManifestArm(label="x", runner=INTERLEAVED_RUNNER, argv=[])
    other = ManifestArm(label="native", runner="native", argv=[])
    base = dict(
        manifest_version=1,
        experiment=None,
        created_utc="t",
        command=[],
        baseline="x",
        runner_options=[],
    )
    assert Manifest(**base, arms=[arm], runs=[]).interleaved
    assert not Manifest(**base, arms=[other], runs=[]).interleaved
    with pytest.raises(ValueError, match="never mixed"):
        Manifest(**base, arms=[arm, other], runs=[])
    run = dict(
        index=1, block=1, position=1, label="native", runner="native", repeat=1, command=[],
        result=None, log="l", status="failed", exit_status=1, started_utc="t", finished_utc="t",
        seconds=0.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="never mixed"):
        Manifest(**base, arms=[arm], runs=[ManifestRun(**run)])


@pytest.mark.parametrize(
    ("fmt", "start", "inside"),
    [
        ("text", "resnet18 on ", "\nPer-step cost in one process, interleaved: "),
        ("markdown", "# resnet18 on ", "| process | run | fabric vs native"),
        ("json", "{", '"question": "per-step cost in one process, interleaved"'),
        ("html", "<!DOCTYPE html>", '<p class="verdict">fabric vs native: '),
    ],
)
def test_compare_reports_the_folder_as_its_own_question(folder, fmt, start, inside, capsys):
    assert compare_main(["--format", fmt, str(folder / VARIANT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(start) and inside in out
    if fmt == "json":
        doc = json.loads(out)
        # the two ok repeats: their files' runs, pooled; the failed one is not read
        assert doc["files"] == 2 and len(doc["runs"]) == 2 * len(
            json.loads(DATA.read_text())["runs"]
        )
        assert doc["arm"] == "fabric" and doc["baseline"] == "native"
        # repeat 1 built the baseline first, repeat 3 the arm (the plan's order): one process
        # of each build order gives no verdict, and says why
        assert doc["percent_interval"] is None and doc["log_ratio"]["processes"] == 2
        assert "confounded with the arm" in doc["verdict"]


def test_compare_reads_interleaved_files_as_the_folder_does(folder, tmp_path, capsys):
    files = sorted(str(p) for p in (folder / VARIANT / "results").iterdir())
    assert compare_main(["--format", "json", str(folder / VARIANT)]) == 0
    from_folder = json.loads(capsys.readouterr().out)
    assert compare_main(["--format", "json", *files]) == 0
    assert json.loads(capsys.readouterr().out) == from_folder
    report = tmp_path / "report.md"
    assert compare_main(["--format", "markdown", "--output", str(report), *files]) == 0
    assert report.read_text().startswith("# resnet18 on ")
    assert compare_main(["--output", files[0], files[0], "--overwrite-output"]) == 2
    assert "one of the inputs" in capsys.readouterr().err


def test_compare_never_mixes_interleaved_and_separate_results(folder, tmp_path, capsys):
    separate = write(tmp_path / "native.json", make_result("native"))
    interleaved = folder / VARIANT / "results" / "interleaved-r1.json"
    for inputs in ([folder / VARIANT, separate], [separate, interleaved]):
        assert compare_main([str(p) for p in inputs]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "never mixed" in err
        assert "interleaved" in err and str(separate) in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "csv"], "--format csv: interleaved results are reported as text"),
        (["--baseline", "fabric"], "--baseline does not apply to interleaved results"),
        (["--plot", "x.png"], "--plot does not apply to interleaved results"),
        (["--allow-mismatch"], "--allow-mismatch does not apply to interleaved results"),
    ],
)
def test_compare_refuses_what_the_interleaved_report_lacks(folder, tmp_path, args, message, capsys):
    args = [a.replace("x.png", str(tmp_path / "x.png")) for a in args]
    assert compare_main([*args, str(folder / VARIANT)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "x.png").exists()


def test_compare_on_a_plan_folder_names_its_variant_folders(folder, capsys):
    assert compare_main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert "is a folder without manifest.json" in err and str(folder / VARIANT) in err


def test_an_interleaved_result_is_still_refused_by_the_separate_run_loader(folder):
    from compare.api import load

    with pytest.raises(ResultError, match="python -m compare.interleaved"):
        load([folder / VARIANT])
