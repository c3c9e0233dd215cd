"""The experiment's own inputs and its runs' lifetimes: checked before
the first run with one line and nothing left behind; a run's whole process group stopped; no
result beside a run recorded as failed; one folder, one experiment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, clean_env, refusal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import UsageError
from experiment.inputs import PER_RUN_FILES, check_runner_options, take_folder

FAKE = ROOT / "tests" / "experiment_fake_runner.py"


def experiment(
    args: list[str], tmp_path: Path, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess:
    """python -m experiment ARGS with the fake runner."""
    e = clean_env(
        DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE),
        FAKE_ORDER=str(tmp_path / "order"),
        FAKE_CHECKS=str(tmp_path / "checks"),
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "experiment", *args],
        cwd=ROOT,
        env=e,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refused_before_any_run(
    proc: subprocess.CompletedProcess, tmp_path: Path, out: Path, words: str
) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "order").exists(), "a run started"
    assert not out.exists() or list(out.iterdir()) == [], "something was left behind"


# --- inputs, before the first run -----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--", "--help"], "runner option --help: every run would exit without a result"),
        (["--", "-h"], "runner option -h"),
        (["--", "--check"], "runner option --check"),
        (["--", "--trace", "t.json"], "each run writes its own file; put {run} in the name"),
        (["--", "--pyprofile={out}/p/{label}.pstats"], "runner option --pyprofile"),
        (["--python", "/nonexistent/python3"], "--python /nonexistent/python3: no such program"),
    ],
)
def test_runner_options_that_fail_every_run_are_refused_before_any_run(tmp_path, args, words):
    out = tmp_path / "exp"  # in this process (tests/conftest.py's refusal): no process starts
    line = refusal(
        "experiment",
        ["--out", str(out), *args],
        DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE),
        FAKE_ORDER=str(tmp_path / "order"),
    )
    assert words in line
    assert not (tmp_path / "order").exists() and not out.exists()


def test_out_under_a_file_or_on_proc_is_one_line_and_leaves_nothing(tmp_path):
    (tmp_path / "file").write_text("x")
    proc = experiment(["--out", str(tmp_path / "file" / "exp")], tmp_path)
    refused_before_any_run(proc, tmp_path, tmp_path / "nothing", "is a file, not a folder")
    assert (tmp_path / "file").read_text() == "x"
    proc = experiment(["--out", "/proc/experiment-here"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--out /proc/experiment-here" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "order").exists()


@pytest.mark.parametrize("how", ["fork", "fresh"])
def test_a_runner_that_would_refuse_stops_the_experiment_before_any_run(tmp_path, how):
    out, scratch = tmp_path / "exp", tmp_path / "tmp"
    scratch.mkdir()
    proc = experiment(
        ["--out", str(out), "--arms", "native,lightning", "--launch", how],
        tmp_path,
        FAKE_REFUSE="lightning_impl",
        FAKE_PARENTS=str(tmp_path / "parents"),
        TMPDIR=str(scratch),
    )
    refused_before_any_run(  # the same line, forked by the server or started fresh
        proc,
        tmp_path,
        out,
        "arm lightning: the runner refuses these options:"
        " lightning_impl: error: --lr must be a finite number",
    )
    made = [line.split() for line in (tmp_path / "parents").read_text().splitlines()]
    assert {(what, module, kind) for what, module, kind, _ in made} == {
        ("check", "native", "forked" if how == "fork" else "fresh"),
        ("check", "lightning_impl", "forked" if how == "fork" else "fresh"),
    }
    assert list(scratch.iterdir()) == []  # no server log, no scratch folder left


def test_a_forked_arms_check_runs_in_the_server_its_runs_use(tmp_path):
    """--launch fork: each runner's --check is forked by the arm's fork server, which then
    forks the runs, so its imports are paid once; the server's log ends up in logs/."""
    out, scratch = tmp_path / "exp", tmp_path / "tmp"
    scratch.mkdir()
    proc = experiment(
        ["--out", str(out), "--arms", "native,lightning", "--launch", "fork"]
        + ["--repeats", "1", "--warmup-runs", "0"],
        tmp_path,
        FAKE_PARENTS=str(tmp_path / "parents"),
        TMPDIR=str(scratch),
    )
    assert proc.returncode == 0, proc.stderr
    made = [line.split() for line in (tmp_path / "parents").read_text().splitlines()]
    checks = [m for m in made if m[0] == "check"]
    runs = [m for m in made if m[0] == "run"]
    assert sorted(m[1] for m in checks) == ["lightning_impl", "native"]
    assert sorted(m[1] for m in runs) == ["lightning_impl", "native"]
    assert {m[2] for m in made} == {"forked"}
    assert made.index(checks[-1]) < made.index(runs[0])  # every check before the first run
    assert len({m[3] for m in made}) == 1  # one server (one interpreter) forked them all
    assert (out / "logs" / "forkserver-1.log").is_file()
    assert "ready, imports" in proc.stdout
    assert list(scratch.iterdir()) == []  # the server's first log was moved, not left


def test_each_distinct_runner_is_checked_once(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(
        [
            "--out",
            str(out),
            "--arms",
            "native,native,lightning",
            "--repeats",
            "1",
            "--warmup-runs",
            "0",
            "--profile-runs",
            "all",
            "--",
            "--trace",
            "{out}/traces/{run}.json",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    checks = (tmp_path / "checks").read_text().split()
    assert sorted(checks) == ["lightning_impl", "native", "native"]  # native-b's {run} differs


@settings(
    derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(
        st.sampled_from(
            [
                *PER_RUN_FILES,
                "--steps",
                "5",
                "{run}",
                "{out}/x/{run}.json",
                "x.json",
                "--help",
                "-h",
                "--check",
                "--seed",
                "{repeat}",
                "=",
            ]
        ),
        max_size=6,
    )
)
def test_runner_options_pass_only_when_every_per_run_file_has_run_in_it(options):
    try:
        check_runner_options(options)
    except UsageError as error:
        assert "\n" not in str(error)
        return
    assert not {"--help", "-h", "--check"} & set(options)
    for i, opt in enumerate(options):
        name, eq, value = opt.partition("=")
        if name in PER_RUN_FILES:
            value = value if eq else (options[i + 1] if i + 1 < len(options) else "")
            assert "{run}" in value


def test_out_starting_with_a_dash_runs_and_compares(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "experiment", "--out=-exp", "--repeats", "1", "--warmup-runs", "0"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE), PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "-exp" / "report.txt").is_file()


# --- the folder -----------------------------------------------------------------------------


def test_two_experiments_cannot_take_one_folder(tmp_path):
    out = tmp_path / "exp"
    take_folder(out)
    with pytest.raises(UsageError, match="not empty"):
        take_folder(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    take_folder(empty)  # an empty folder may be taken, once
    with pytest.raises(UsageError):
        take_folder(empty)


def test_folder_take_is_atomic_between_processes(tmp_path):
    code = (
        "import sys; from pathlib import Path; from experiment.inputs import take_folder\n"
        "from common.errors import UsageError\n"
        "try: take_folder(Path(sys.argv[1])); print('took')\n"
        "except UsageError: print('refused')\n"
    )
    out = tmp_path / "race"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        for _ in range(6)
    ]
    answers = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert answers == ["refused"] * 5 + ["took"]


# --- runs that fail leave no result, no process ---------------------------------------------


def test_a_rank_left_behind_by_a_failed_run_is_stopped_and_writes_nothing(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(
        ["--out", str(out), "--repeats", "1", "--warmup-runs", "0"],
        tmp_path,
        FAKE_ORPHAN="native-r1",
    )
    assert proc.returncode == 1, proc.stderr
    time.sleep(4)  # the orphan would have written its result 3 s after its launcher exited
    assert not (out / "results" / "native-r1.json").exists()
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    assert [(r["label"], r["status"]) for r in runs] == [("native", "failed"), ("lightning", "ok")]


def test_a_result_written_by_a_run_that_then_failed_is_removed(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(
        ["--out", str(out), "--repeats", "2", "--warmup-runs", "0"],
        tmp_path,
        FAKE_LATE_FAIL="lightning-r1",
    )
    assert proc.returncode == 1, proc.stderr
    assert not (out / "results" / "lightning-r1.json").exists()
    assert "removed lightning-r1.json" in (out / "logs" / "lightning-r1.log").read_text()
    m = json.loads((out / "manifest.json").read_text())
    for run in m["runs"]:
        stem = f"{run['label']}-r{run['repeat']}.json"
        assert (out / "results" / stem).exists() == (run["status"] == "ok")


@pytest.mark.parametrize("case", ["all-failed", "timeout"])
def test_an_experiment_with_no_ok_run_ends_with_one_line_per_fact_no_traceback(tmp_path, case):
    out = tmp_path / "exp"
    args = ["--out", str(out), "--repeats", "1", "--warmup-runs", "0"]
    env = {"FAKE_FAIL": "native-r1"}
    if case == "timeout":
        args += ["--run-timeout", "1"]
        env = {"FAKE_HANG": "native-r1"}
    proc = experiment(
        [*args, "--arms", "native,native"],
        tmp_path,
        **{k: v.replace("native-r1", "native-r1") for k, v in env.items()},
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "IndexError" not in proc.stderr
    assert proc.stderr.count("compare failed") <= 1


def test_sigterm_during_the_final_reports_does_not_exit_0(tmp_path, monkeypatch):
    from experiment.labelled_arms import label_arms
    from experiment.run import Experiment
    from experiment.settings import Settings

    out = tmp_path / "exp"
    take_folder(out)
    s = Settings(
        out=out,
        arms=label_arms(["native", "lightning"]),
        options=[],
        repeats=1,
        python=sys.executable,
        launch="fresh",
        warmup_runs=0,
    )
    monkeypatch.setenv("DDPBENCH_EXPERIMENT_FAKE_RUNNER", str(FAKE))
    exp = Experiment(s)
    real_finish = exp.reporter.finish

    def finish_with_sigterm() -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the reports are written
        return real_finish()

    exp.reporter.finish = finish_with_sigterm  # type: ignore[method-assign]
    assert exp.run() == 128 + signal.SIGTERM


def test_sigint_during_the_first_run_is_one_line_exit_130_and_stops_its_group(tmp_path):
    out = tmp_path / "exp"
    env = clean_env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE), FAKE_HANG="native-r1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiment", "--warmup-runs", "0", "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "logs" / "native-r1.log").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "stopped by SIGINT" in err and "Traceback" not in err
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    assert [(r["label"], r["status"]) for r in runs] == [("native", "failed")]
    assert not (out / "results" / "native-r1.json").exists()


# --- in-process, as python -m experiment reads them (experiment.cli.main) -------------------


def cli_refused(argv: list[str], out: Path, capsys) -> str:
    """The one stderr line of an experiment refused before anything starts (exit 2), with
    nothing made at --out."""
    from experiment import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["--out", str(out), *argv])
    captured = capsys.readouterr()
    assert stop.value.code == 2 and captured.err.count("\n") == 1, captured
    assert "Traceback" not in captured.err and not out.exists()
    return captured.err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--repeats", "0"], "--repeats must be 1 or more, got 0"),
        (["--repeats", "-2"], "--repeats must be 1 or more, got -2"),
        (["--", "--help"], "runner option --help: every run would exit without a result"),
        (["--", "--check"], "runner option --check"),
        (["--", "--output", "r.json"], "runner option --output: results go into the experiment"),
        (["--python", "/nonexistent/python3"], "--python /nonexistent/python3: no such program"),
    ],
)
def test_the_in_process_plan_makes_the_experiments_checks(args, words, tmp_path, capsys):
    """--repeats 0 became the plan's 6 and --repeats -2 an empty manifest with exit 0; -- --help
    ran six processes that each exited 0 without a result."""
    own, runner = (args, []) if "--" not in args else ([], args)
    err = cli_refused(["--plan", "in-process", *own, *runner], tmp_path / "exp", capsys)
    assert err.startswith("experiment: error: ") and words in err, err


@pytest.mark.parametrize(
    ("arms", "label", "runs"),
    [
        ("native,fabric-raw-step=fabric", "fabric-raw-step", "fabric"),
        ("lightning=native,fabric", "lightning", "native"),
        ("native,lightning-services=lightning", "lightning-services", "lightning"),
    ],
)
def test_a_label_that_names_another_arm_of_the_table_is_refused(
    arms, label, runs, tmp_path, capsys
):
    """It was reported as that arm ('fabric-raw-step vs native' for a Fabric run)."""
    err = cli_refused(["--arms", arms], tmp_path / "exp", capsys)
    assert f"--arms: label '{label}' names another arm of the arms table" in err
    assert f"than the one it runs ({runs})" in err


def test_a_gpu_plan_on_a_machine_without_a_gpu_names_its_cpu_plan(tmp_path, capsys):
    """The runners' advice, --accelerator cpu, would run the GPU plan's arms and sizes on CPUs."""
    from common.gpus import cuda_capabilities
    from experiment import plans
    from experiment.cli import check_gpu_plan

    if cuda_capabilities():
        pytest.skip("CUDA is available here")
    err = cli_refused(["--plan", "responsibilities"], tmp_path / "exp", capsys)
    assert err == (
        "experiment: error: --plan responsibilities runs on GPUs and CUDA is not available"
        " here; on CPUs run --plan responsibilities-cpu, its counterpart for CPU ranks\n"
    )
    plan = plans.find("responsibilities")
    check_gpu_plan(plan, [["--devices", "2", "--accelerator", "cpu"]])  # on CPUs as asked
    check_gpu_plan(plans.find("gpt"), [["--devices", "1"]])  # no CPU plan: the runner's line
