"""python -m experiment: ABBA order, the folder and manifest, failures, signals, plans.

The fast tests substitute tests/experiment_fake_runner.py for the runners (the test-only
DDPBENCH_EXPERIMENT_FAKE_RUNNER); one slow test runs the real runners on CPU.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TINY, clean_env, needs_lightning, refusal

from experiment import cli, plans
from experiment.settings import SETTLE_MINUTES, expand

FAKE = ROOT / "tests" / "experiment_fake_runner.py"


def experiment(
    args: list[str], tmp_path: Path, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess:
    """python -m experiment ARGS with the fake runner."""
    e = clean_env(
        DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE), FAKE_ORDER=str(tmp_path / "order"), **env
    )
    return subprocess.run(
        [sys.executable, "-m", "experiment", *args],
        cwd=ROOT,
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_runs_interleave_in_abba_blocks_and_the_folder_is_complete(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(["--repeats", "3", "--out", str(out), "--", "--steps", "5"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    order = (tmp_path / "order").read_text().split()
    # one warm-up run per arm by default, ending with the baseline (block 1 follows it as each
    # block follows the one before: stats.orders), then the baseline's warm-up runs until the
    # host has settled: the fake runner's runs agree, so as many as span the settling rule's
    # lookback (stats.settling.lookback_for: 4 runs' time here), native-w2 .. native-wK
    extra = len(order) - 8
    assert extra >= 2
    assert order == [
        "lightning-w1",
        "native-w1",
        *(f"native-w{k}" for k in range(2, extra + 2)),
        "native-r1",
        "lightning-r1",
        "lightning-r2",
        "native-r2",
        "native-r3",
        "lightning-r3",
    ]
    m = manifest(out)
    assert m["manifest_version"] == 1 and m["baseline"] == "native" and m["experiment"] is None
    assert [a["label"] for a in m["arms"]] == ["native", "lightning"]
    assert m["arms"][1]["argv"] == ["-m", "lightning_impl"]
    assert m["runner_options"] == ["--steps", "5"]
    assert [(r["block"], r["position"], r["label"], r["status"]) for r in m["runs"]] == [
        (0, 1, "lightning", "warmup"),
        (0, 2, "native", "warmup"),
        *[(0, 1, "native", "warmup")] * extra,
        (1, 1, "native", "ok"),
        (1, 2, "lightning", "ok"),
        (2, 1, "lightning", "ok"),
        (2, 2, "native", "ok"),
        (3, 1, "native", "ok"),
        (3, 2, "lightning", "ok"),
    ]
    for r in m["runs"]:
        assert r["exit_status"] == 0
        assert (out / r["result"]).is_file() and (out / r["log"]).is_file()
        options = r["command"][r["command"].index("--steps") : -2]
        first = r["status"] == "ok" and r["block"] == 1  # each arm's first counted run profiles
        assert options == ["--steps", "5"] + ([] if first else ["--profile-steps", "0"])
    assert [r["result"] for r in m["runs"][:3]] == [
        "warmup/lightning-w1.json",
        "warmup/native-w1.json",
        "warmup/native-w2.json",
    ]
    settling = m["settling"]
    assert settling["settled"] and (settling["runs"], settling["extra_runs"]) == (extra + 1, extra)
    assert (
        settling["max_minutes"] == SETTLE_MINUTES
        and f"settled after {extra + 1} warm-up run(s)" in settling["reason"]
    )
    assert m["stopping"] == {
        "rule": None,
        "first_stage_blocks": None,
        "target_half_width": None,
        "max_blocks": 3,
        "budget_minutes": None,
        "reason": "3 block(s) done",
        "complete_blocks": None,
        "blocks_needed": None,
        "makeup": None,
        "cycle_blocks": 2,
        "carry_over_imbalance": 0,  # ABBA after a warm-up that ended with the baseline
    }
    assert sorted(p.name for p in (out / "results").iterdir()) == [
        f"{label}-r{k}.json" for label in ("lightning", "native") for k in (1, 2, 3)
    ]
    report = (out / "report.txt").read_text()
    assert "native" in report and "3 runs a side" in report and "w1" not in report
    assert "host settled before the counted runs" in report
    assert (out / "report.md").is_file()
    assert (out / "comparison.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "drift.png").read_bytes().startswith(b"\x89PNG")
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == 2
    assert "[6/6 " in proc.stdout and "lightning vs native" in proc.stdout
    assert "[w1/1 " in proc.stdout and "(warm-up, not counted)" in proc.stdout
    assert "[settling 1 " in proc.stdout and "experiment: host settled (" in proc.stdout
    assert f"{len(order)} run(s) ({extra + 2} warm-up)" in proc.stdout


def test_warmup_runs_zero_counts_every_run_and_two_run_twice_per_arm(tmp_path):
    proc = experiment(
        ["--repeats", "1", "--warmup-runs", "0", "--out", str(tmp_path / "a")], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "order").read_text().split() == ["native-r1", "lightning-r1"]
    assert not (tmp_path / "a" / "warmup").exists()
    (tmp_path / "order").unlink()
    proc = experiment(
        ["--repeats", "1", "--warmup-runs", "2", "--settle-minutes", "0"]
        + ["--out", str(tmp_path / "b")],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "order").read_text().split() == [
        "lightning-w1",
        "native-w1",
        "lightning-w2",
        "native-w2",
        "native-r1",
        "lightning-r1",
    ]
    assert [r["warmup"] for r in manifest(tmp_path / "b")["runs"]] == [1, 1, 2, 2, None, None]


def test_a_failed_warmup_run_is_recorded_and_reported_but_decides_nothing(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(["--repeats", "2", "--out", str(out)], tmp_path, FAKE_FAIL="lightning-w1")
    assert proc.returncode == 0, proc.stderr
    runs = manifest(out)["runs"]
    assert [(r["label"], r["status"]) for r in runs[:2]] == [
        ("lightning", "failed"),
        ("native", "warmup"),
    ]
    # then the baseline's settling runs (native-w2, ...), then the counted ones
    assert [r["status"] for r in runs[-4:]] == ["ok"] * 4
    assert all(r["status"] == "warmup" for r in runs[2:-4])
    assert "1 warm-up run(s) failed (not counted): lightning w1 (exit 3)" in proc.stderr
    assert "2 runs a side" in (out / "report.txt").read_text()


def test_a_usage_error_in_a_warmup_run_stops_before_any_counted_run(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(["--out", str(out)], tmp_path, FAKE_USAGE="lightning-w1")
    assert proc.returncode == 2
    assert proc.stderr == "lightning_impl: error: --bogus is not an option\n"
    assert [(r["label"], r["exit_status"]) for r in manifest(out)["runs"]] == [("lightning", 2)]


def test_a_failed_run_is_kept_the_others_go_on_and_the_exit_is_nonzero(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(
        ["--repeats", "2", "--warmup-runs", "0", "--out", str(out)],
        tmp_path,
        FAKE_FAIL="lightning-r1",
    )
    assert proc.returncode == 1
    m = manifest(out)
    runs = m["runs"]
    assert len(runs) == 6  # block 3 makes up block 1, in its order
    failed = [r for r in runs if r["status"] == "failed"]
    assert [(r["label"], r["repeat"], r["exit_status"], r["result"]) for r in failed] == [
        ("lightning", 1, 3, None)
    ]
    assert [(r["block"], r["label"]) for r in runs[4:]] == [(3, "native"), (3, "lightning")]
    assert m["stopping"]["makeup"] == [
        {"block": 3, "replaces": 1, "reason": "a run failed: lightning (exit 3)"}
    ]
    assert "injected failure" in (out / "logs" / "lightning-r1.log").read_text()
    assert "lightning r1 (exit 3)" in proc.stderr
    assert (out / "report.txt").is_file()


def test_a_usage_error_in_a_run_stops_the_experiment_with_that_line(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(["--warmup-runs", "0", "--out", str(out)], tmp_path, FAKE_USAGE="native-r1")
    assert proc.returncode == 2
    assert proc.stderr == "native: error: --bogus is not an option\n"
    assert [r["exit_status"] for r in manifest(out)["runs"]] == [2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arms", "native,bogus"], "unknown arm 'bogus'"),
        (["--arms", "native"], "at least two arms"),
        (["--repeats", "0"], "--repeats must be 1 or more"),
        (["--warmup-runs", "-1"], "--warmup-runs must be 0 or more"),
        (["--target-half-width", "-1"], "--target-half-width must be a positive"),
        (["--budget-minutes", "0"], "--budget-minutes must be positive"),
        (
            ["--target-half-width", "1", "--first-stage-blocks", "1"],
            "--first-stage-blocks must be 2 or more",
        ),
        (["--first-stage-blocks", "3"], "--first-stage-blocks needs --target-half-width"),
        (["--settle-minutes", "-1"], "--settle-minutes must be 0 or more"),
        (["--plan", "nope"], "no plan 'nope'"),
        (["--", "--output", "x.json"], "results go into the experiment folder"),
        (["--", "--ddp-stream", "current"], "runner option --ddp-stream: it would make every arm"),
        (["--", "--ablation=raw-step"], "runner option --ablation=raw-step: it would make every"),
        (["--", "--no-barebones"], "name each arm in --arms instead (e.g. --arms"),
        (["--", "--trace", "{nope}.json"], "unknown placeholder {nope}"),
        (["--launch", "srun"], "srun"),
        (["--", "--trace", "{out}/{run}.json"], "give --profile-runs all"),
        (["--run-timeout", "inf"], "--run-timeout must be a finite number, got inf"),
        (
            ["--target-half-width", "1", "--repeats", "3"],
            "--repeats 3 is below the first stage of --target-half-width (5 complete blocks,"
            " --first-stage-blocks): give --repeats 5 or more",
        ),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2_before_any_run(tmp_path, args, message):
    """In this process (tests/conftest.py's refusal: no process may start); as its own process,
    the test after this one."""
    line = refusal(
        cli.main,
        ["--out", str(tmp_path / "exp"), *args],
        DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE),
        FAKE_ORDER=str(tmp_path / "order"),
    )
    assert line.startswith("experiment: error: ") and message in line, line
    assert not (tmp_path / "order").exists() and not (tmp_path / "exp").exists()


def test_a_mistake_is_one_line_on_stderr_exit_2_as_its_own_process(tmp_path):
    proc = experiment(["--out", str(tmp_path / "exp"), "--repeats", "0"], tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "experiment: error: --repeats must be 1 or more, got 0\n", proc.stderr
    assert not (tmp_path / "order").exists() and not (tmp_path / "exp").exists()


def test_only_each_arms_first_counted_run_profiles_unless_profile_runs_all(tmp_path):
    # the profiled window (GPU busy share) costs seconds a run: measured once per arm; a run that
    # failed measured nothing, so the arm's next counted run profiles instead
    base = ["--repeats", "3", "--settle-minutes", "0"]
    proc = experiment(
        [*base, "--out", str(tmp_path / "a"), "--", "--steps", "5"], tmp_path, FAKE_FAIL="native-r1"
    )
    assert proc.returncode == 1, proc.stderr

    def profiled(out: Path) -> list[str]:
        return [
            f"{r['label']}-{'w' if r['warmup'] else 'r'}{r['warmup'] or r['repeat']}"
            for r in manifest(out)["runs"]
            if "--profile-steps" not in r["command"]
        ]

    assert profiled(tmp_path / "a") == ["native-r1", "lightning-r1", "native-r2"]
    proc = experiment([*base, "--profile-runs", "all", "--out", str(tmp_path / "b")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(profiled(tmp_path / "b")) == len(manifest(tmp_path / "b")["runs"]) == 8
    assert "--profile-runs all" in " ".join(manifest(tmp_path / "b")["command"])


def test_an_existing_folder_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "keep.json").write_text("{}")
    proc = experiment(["--out", str(out)], tmp_path)
    assert proc.returncode == 2 and "is not empty" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["keep.json"]


def test_adaptive_mode_stops_at_the_first_stage_once_the_target_is_met(tmp_path):
    # Stein's two-stage rule; a wide target needs no more than the first stage
    out = tmp_path / "exp"
    proc = experiment(
        [
            "--target-half-width",
            "50",
            "--first-stage-blocks",
            "3",
            "--settle-minutes",
            "0",
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    m = manifest(out)
    assert len(m["runs"]) == 2 + 2 * 3  # the warm-up runs first
    assert m["settling"] is None  # --settle-minutes 0
    stopping = m["stopping"]
    assert (stopping["rule"], stopping["first_stage_blocks"], stopping["target_half_width"]) == (
        "stein-two-stage",
        3,
        50,
    )
    assert stopping["complete_blocks"] == {"lightning": 3} and stopping["blocks_needed"] == {
        "lightning": 3
    }
    assert "every arm has the complete blocks it needs" in stopping["reason"]
    assert "stopping rule: complete/needed blocks: lightning 2/?" in proc.stdout
    report = (out / "report.txt").read_text()
    assert "Stein's two-stage rule" in report


def test_adaptive_mode_counts_complete_blocks_not_blocks_started(tmp_path):
    # the audit: the old loop counted blocks, so failed runs let it stop early
    out = tmp_path / "exp"
    proc = experiment(
        [
            "--target-half-width",
            "50",
            "--first-stage-blocks",
            "3",
            "--warmup-runs",
            "0",
            "--out",
            str(out),
        ],
        tmp_path,
        FAKE_FAIL="lightning-r2",
    )
    assert proc.returncode == 1  # a run failed
    runs = manifest(out)["runs"]
    assert [(r["block"], r["label"], r["status"]) for r in runs if r["status"] == "failed"] == [
        (2, "lightning", "failed")
    ]
    assert max(r["block"] for r in runs) == 4  # block 2 incomplete: a fourth block
    assert manifest(out)["stopping"]["complete_blocks"] == {"lightning": 3}


@pytest.mark.parametrize(
    ("minutes", "env", "seen", "said", "reported"),
    [
        # a bound shorter than one run: the first warm-up run spends it (forked runs are fast)
        (
            "0.0005",
            {"FAKE_WARMUP_DRIFT": "10"},
            "too-few",
            "warning: host NOT settled within 0.0005 min",
            "the host had NOT settled when the counted runs began",
        ),
        # the host is steady from w1; the GPU's window ends 1 C warmer each warm-up run, for ever
        (
            "0.15",
            {"FAKE_WARMUP_HEAT": "endless"},
            "heating",
            "warning: GPU still warming after 0.15 min",
            "the GPU was still warming when the counted runs began",
        ),
    ],
)
def test_a_machine_that_does_not_settle_within_the_bound_is_recorded_and_warned(
    tmp_path, minutes, env, seen, said, reported
):
    out = tmp_path / "exp"
    proc = experiment(
        ["--repeats", "1", "--settle-minutes", minutes, "--out", str(out)], tmp_path, **env
    )
    assert proc.returncode == 0, proc.stderr
    settling = manifest(out)["settling"]
    assert settling["settled"] is False and settling["seen"] == seen, settling
    assert said in proc.stdout and (seen == "heating") == ("host NOT settled" not in proc.stdout)
    report = (out / "report.txt").read_text()
    assert reported in report and (seen == "heating") == ("the host had NOT" not in report)
    if seen == "too-few":  # the bound holds less than one run: the reason says what to give it
        assert settling["extra_runs"] == 0 and "settling needs 3" in settling["reason"]
        assert "--settle-minutes 0.0005 left room for about 0.0 settling runs" in settling["reason"]
        assert "give it 0.5 or more (the warm-up runs and 6 settling runs)" in settling["reason"]


def test_settling_adds_baseline_warmup_runs_until_the_medians_agree(tmp_path):
    out = tmp_path / "exp"
    # the k-th warm-up run 17%/k^2 slow: w1 +17%, w2 +4.3%, w3 +1.9%, w4 +1.1%; the fake's
    # noise is at most 0.3% a run, so the trend over w1..w3 is far over 1.5%: not settled
    # before w4 (stats.settling; tests/test_stats_settling.py simulates the rule)
    proc = experiment(["--repeats", "1", "--out", str(out)], tmp_path, FAKE_WARMUP_DRIFT="17")
    assert proc.returncode == 0, proc.stderr
    order = (tmp_path / "order").read_text().split()
    k = len(order) - 3
    assert k >= 4 and order == [
        "lightning-w1",
        "native-w1",
        *(f"native-w{j}" for j in range(2, k + 1)),
        "native-r1",
        "lightning-r1",
    ]
    settling = manifest(out)["settling"]
    assert settling["settled"] and (settling["runs"], settling["extra_runs"]) == (k, k - 1)


def test_settling_waits_for_a_gpu_that_is_still_warming(tmp_path):
    # the host is steady from w1; the GPU's window ends at 25, 55, 61, 62, 63, 64, 64, 64,
    # 65 C...: over 1 C a minute (the fake's runs are short) until the window is flat
    # (stats.settling; tests/test_stats_settling.py simulates the rule)
    out = tmp_path / "exp"
    proc = experiment(["--repeats", "1", "--out", str(out)], tmp_path, FAKE_WARMUP_HEAT="40")
    assert proc.returncode == 0, proc.stderr
    settling = manifest(out)["settling"]
    assert settling["settled"] and settling["extra_runs"] >= 8, settling
    assert "the GPU at 65 C" in settling["reason"]
    assert "host settled" in proc.stdout


def test_a_b_a_labels_and_sigterm_leave_a_consistent_manifest(tmp_path):
    out = tmp_path / "exp"
    env = clean_env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE), FAKE_HANG="native-b-r1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "experiment",
            "--arms",
            "native,native",
            "--warmup-runs",
            "0",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "logs" / "native-b-r1.log").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    runs = manifest(out)["runs"]
    assert [(r["label"], r["status"]) for r in runs] == [("native", "ok"), ("native-b", "failed")]
    assert "stopped by SIGTERM" in err


def test_placeholders_expand_per_run_into_the_folder():
    assert expand(
        ["--trace", "{out}/traces/{run}.json", "--x", "{label}:{repeat}"], Path("/d"), "native", 2
    ) == ["--trace", "/d/traces/native-r2.json", "--x", "native:2"]
    assert expand(
        ["--trace", "{out}/traces/{run}.json", "--seed", "{repeat}"],
        Path("/d"),
        "native",
        2,
        warmup=True,
    ) == ["--trace", "/d/traces/native-w2.json", "--seed", "2"]  # still a number


def test_plans_list_names_and_questions_and_expand_to_variant_folders(tmp_path):
    proc = experiment(["--list-plans"], tmp_path)
    assert proc.returncode == 0
    for plan in plans.PLANS:
        assert f"{plan.name} " in proc.stdout and plan.question in proc.stdout
    out = tmp_path / "plan"
    proc = experiment(
        ["--plan", "host-slack", "--variant", "lightning", "--repeats", "1", "--out", str(out)],
        tmp_path,
    )
    m = manifest(out / "lightning")
    assert m["experiment"] == "host-slack/lightning"
    assert m["arms"][1] == {
        "label": "lightning-host-delay-2000",
        "runner": "lightning",
        "argv": ["-m", "lightning_impl", "--host-delay-us", "2000"],
        "python": sys.executable,
    }


def test_the_original_workload_plan_answers_every_question_of_issue_21_in_one_folder(tmp_path):
    out = tmp_path / "plan"
    proc = experiment(
        ["--plan", "original-workload", "--repeats", "2", "--warmup-runs", "0", "--out", str(out)],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    m = manifest(out)
    assert [a["label"] for a in m["arms"]] == ["native", "native-b", "fabric", "lightning"]
    assert m["runner_options"] == ["--warmup-steps", "50", "--steps", "200"]
    report = (out / "report.txt").read_text()
    for pair in (
        "native-b vs native",
        "fabric vs native",
        "lightning vs native",
        "lightning vs fabric",
    ):
        assert pair in report
    assert "Host cost per step" in report


def test_experiment_imports_neither_torch_nor_lightning():
    code = (
        "import sys, runpy; sys.argv = ['experiment', '--list-plans'];\n"
        "try: runpy.run_module('experiment', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'lightning')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr


def test_srun_launch_derives_devices_from_the_job(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    srun = bin_ / "srun"
    srun.write_text(f'#!/usr/bin/env bash\necho "$*" >> {tmp_path}/srun.args\nshift\nexec "$@"\n')
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "exp"
    proc = experiment(
        ["--repeats", "1", "--warmup-runs", "0", "--out", str(out)],
        tmp_path,
        PATH=f"{bin_}:{os.environ['PATH']}",
        SLURM_JOB_ID="4242",
        SLURM_NTASKS_PER_NODE="2",
        SLURM_NNODES="1",
    )
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "srun.args").read_text().splitlines()
    assert len(lines) == 4 and all(line.startswith("--kill-on-bad-exit=1 ") for line in lines)
    assert [line.endswith(" --check") for line in lines] == [True, True, False, False]  # checks
    assert all("--devices 2 --num-nodes 1" in line for line in lines)
    proc = experiment(
        ["--repeats", "1", "--out", str(tmp_path / "e2"), "--", "--devices", "4"],
        tmp_path,
        PATH=f"{bin_}:{os.environ['PATH']}",
        SLURM_JOB_ID="4242",
        SLURM_NTASKS_PER_NODE="2",
    )
    assert proc.returncode == 2 and "--devices 4 but the Slurm job has 2" in proc.stderr


@pytest.mark.slow
@needs_lightning
def test_real_runners_on_cpu_two_repeats(tmp_path):
    out = tmp_path / "exp"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiment",
            "--repeats",
            "2",
            "--warmup-runs",
            "0",
            "--out",
            str(out),
            "--",
            *TINY,
            "--devices",
            "2",
        ],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (out / "results").iterdir()) == [
        "lightning-r1.json",
        "lightning-r2.json",
        "native-r1.json",
        "native-r2.json",
    ]
    assert "lightning" in (out / "report.txt").read_text()


@pytest.mark.slow
@needs_lightning
def test_the_gpt_plan_asks_native_fabric_and_the_trainer_on_cpu(tmp_path):
    """The plan's question in one command (here the tiny preset on CPU, one repeat): three
    arms, and a report that counts tokens."""
    out = tmp_path / "exp"
    tiny = ["--accelerator", "cpu", "--gpt-preset", "tiny", "--precision", "fp32"]
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "experiment", "--plan", "gpt", "--variant", "gpu-bound"),
            *("--repeats", "1", "--warmup-runs", "0", "--out", str(out), "--", *tiny),
            *("--batch-size-per-device", "2", "--warmup-steps", "1", "--steps", "3"),
        ],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (out / "gpu-bound" / "results").iterdir()) == [
        "fabric-r1.json",
        "lightning-r1.json",
        "native-r1.json",
    ]
    report = (out / "gpu-bound" / "report.txt").read_text()
    assert report.startswith("gpt (tiny) on ") and "2 sequences/rank" in report.splitlines()[0]
    assert "tok/s ↑" in report and "img/s" not in report


def test_a_running_estimate_that_compare_cannot_make_is_shown_as_a_failure(tmp_path):
    from common.manifest import ManifestRun
    from experiment.labelled_arms import label_arms
    from experiment.run import Experiment
    from experiment.settings import Settings

    out = tmp_path / "exp"
    (out / "results").mkdir(parents=True)
    settings = Settings(
        out=out,
        arms=label_arms(["native", "lightning"]),
        options=[],
        repeats=1,
        python=sys.executable,
        launch="fresh",
    )
    exp = Experiment(settings)
    for i, arm in enumerate(settings.arms, 1):
        (out / "results" / f"{arm.label}-r1.json").write_text('{"truncated": ')
        exp.recorder.runs.append(
            ManifestRun(
                index=i,
                block=1,
                position=i,
                label=arm.label,
                runner=arm.runner,
                repeat=1,
                command=[],
                result=f"results/{arm.label}-r1.json",
                log=f"logs/{arm.label}-r1.log",
                status="ok",
                exit_status=0,
                started_utc="",
                finished_utc="",
                seconds=1.0,
            )
        )
    exp.recorder.write()
    line = exp.reporter.describe(exp.reporter.estimate())
    assert (
        line.startswith("    estimate: compare failed: ")
        and "native-r1.json: not valid JSON" in line
    )


def test_srun_options_read_the_job_shape_as_the_runners_do(monkeypatch):
    from common.errors import UsageError
    from experiment import launch

    monkeypatch.setattr(launch.shutil, "which", lambda name: "/usr/bin/srun")
    for name in ("SLURM_NTASKS_PER_NODE", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2(x3)")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "3")
    assert launch.srun_options(["--steps", "5"]) == ["--devices", "2", "--num-nodes", "3"]
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "3,1")
    with pytest.raises(UsageError, match=r"spread unevenly .*--ntasks-per-node"):
        launch.srun_options([])
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2")
    monkeypatch.delenv("MASTER_PORT", raising=False)
    assert "MASTER_PORT" not in launch.srun_environment()  # the runners derive it (one rule)


def test_no_class_or_function_in_experiment_is_over_200_lines():
    """Issue 43: the recorder, the schedules and the reporter stay small enough to read."""
    import ast

    long = []
    for path in sorted((ROOT / "experiment").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > 200:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
