"""Arms with their own interpreter and --arms hardening.

Interpreters here are shell wrappers around this Python: one that cannot see the suite
(`-I`), one that sees a stand-in `lightning` package of a given version. No torch, no Lightning.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

from common.errors import UsageError
from experiment import plans
from experiment.labelled_arms import (
    LABEL,
    LabelledArm,
    check_arms,
    label_arms,
    parse_arms,
    unique_labels,
    with_envs,
)

FAKE = ROOT / "tests" / "experiment_fake_runner.py"


def experiment(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
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
        timeout=120,
    )


def wrapper(path: Path, body: str) -> Path:
    """An executable shell script that runs this Python (`exec PY "$@"` after body)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def env_with_lightning(folder: Path, version: str) -> Path:
    """An interpreter that imports a stand-in `lightning` of this version (and the suite)."""
    package = folder / "site" / "lightning"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return wrapper(
        folder / "bin" / "python", f'PYTHONPATH={folder / "site"}:{ROOT} exec {sys.executable} "$@"'
    )


def test_an_arm_names_its_interpreter_and_an_optional_label():
    arms = parse_arms("native,old=lightning@/x/bin/python,fabric@/y/bin/python")
    assert [(a.label, a.runner, a.python) for a in arms] == [
        ("", "native", None),
        ("old", "lightning", "/x/bin/python"),
        ("", "fabric", "/y/bin/python"),
    ]  # check_arms names them: fabric from its probe
    assert [a.label for a in unique_labels(arms)] == ["native", "old", "fabric"]
    assert arms[1].argv == ["-m", "lightning_impl"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--arms is empty"),
        (" ", "--arms is empty"),
        ("native,", "unknown arm ''"),
        ("native,lightning@", "names no interpreter after @"),
        ("native,a/b=native", "label 'a/b' is not a plain name"),
        ("native,$x=native", "label '$x' is not a plain name"),
        ("native,..=native", "label '..' is not a plain name"),
        ("x=native,x=native", "label 'x' is given to two arms"),
    ],
)
def test_arms_mistakes_are_refused(text, message):
    with pytest.raises(UsageError, match=None) as error:
        parse_arms(text)
    assert message in str(error.value)


def test_many_duplicates_get_plain_labels_never_control_characters():
    labels = [a.label for a in label_arms(["native"] * 60)]
    assert labels[:3] == ["native", "native-b", "native-c"] and labels[25] == "native-z"
    assert labels[26:28] == ["native-27", "native-28"]
    assert len(set(labels)) == 60 and all(LABEL.fullmatch(label) for label in labels)


def test_an_empty_arms_option_does_not_run_the_default_arms(tmp_path):
    proc = experiment(["--arms", "", "--out", str(tmp_path / "exp")], tmp_path)
    assert proc.returncode == 2 and "--arms is empty" in proc.stderr
    assert not (tmp_path / "order").exists() and not (tmp_path / "exp").exists()


def refusal(tmp_path: Path, arms: str, **env: str) -> str:
    """The one line an experiment with these arms is refused with; nothing ran or was made."""
    proc = experiment(["--arms", arms, "--out", str(tmp_path / "exp")], tmp_path, **env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "order").exists() and not (tmp_path / "exp").exists()
    return proc.stderr


def test_a_missing_interpreter_is_refused_before_any_run(tmp_path):
    assert "lightning@/no/such/python: no such interpreter" in refusal(
        tmp_path, "native,lightning@/no/such/python"
    )


def test_an_interpreter_that_is_not_executable_is_refused(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n")
    assert "the interpreter is not executable" in refusal(tmp_path, f"native,lightning@{python}")


def test_an_interpreter_that_is_not_python_is_refused(tmp_path):
    python = wrapper(tmp_path / "python", "exit 0")
    assert "cannot run it as Python 3" in refusal(tmp_path, f"native,native@{python}")


def test_an_interpreter_that_cannot_import_the_runner_is_refused(tmp_path):
    python = wrapper(tmp_path / "python", f'cd /; exec {sys.executable} -I -S "$@"')  # no suite
    assert "cannot import the runner (lightning_impl.fabric)" in refusal(
        tmp_path, f"native,fabric@{python}"
    )


def test_an_unsupported_lightning_is_refused_with_the_runners_own_text(tmp_path):
    python = env_with_lightning(tmp_path / "env", "2.5.1")
    line = refusal(tmp_path, f"native,lightning@{python}")
    assert "Lightning 2.5.1 is older than 2.5.5 (its autocast caches casts;" in line
    assert "DDPBENCH_ALLOW_OLD_LIGHTNING=1" in line
    none = env_with_lightning(tmp_path / "none", "2.2.5")
    assert "older than 2.4.0" in refusal(
        tmp_path, f"native,lightning@{none}", DDPBENCH_ALLOW_OLD_LIGHTNING="1"
    )


def test_an_arm_runs_under_its_interpreter_labelled_by_its_lightning(tmp_path):
    python = env_with_lightning(tmp_path / "env", "2.5.1")
    out = tmp_path / "exp"
    proc = experiment(
        [
            "--arms",
            f"native,lightning@{python},fabric@{python}",
            "--repeats",
            "1",
            "--warmup-runs",
            "0",
            "--out",
            str(out),
        ],
        tmp_path,
        DDPBENCH_ALLOW_OLD_LIGHTNING="1",
    )
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(a["label"], a["python"]) for a in manifest["arms"]] == [
        ("native", sys.executable),
        ("lightning-2.5.1", str(python)),
        ("fabric-2.5.1", str(python)),
    ]
    commands = {r["label"]: r["command"] for r in manifest["runs"]}
    assert commands["lightning-2.5.1"][0] == str(python)
    assert commands["native"][0] == sys.executable


def test_a_plans_envs_are_found_under_envs_or_the_command_that_makes_them_is_named(tmp_path):
    plan = plans.find("sigterm-cpu")
    with pytest.raises(UsageError, match="give --envs DIR"):
        with_envs(list(plan.arms), None, "/base/python", plan.name)
    with pytest.raises(UsageError) as error:
        with_envs(list(plan.arms), tmp_path, "/base/python", plan.name)
    assert str(error.value) == (
        f"--envs {tmp_path}: no environment lightning-2.5.1"
        f" ({tmp_path}/lightning-2.5.1/bin/python is missing); make it: python"
        f" tools/make_env.py {tmp_path}/lightning-2.5.1 --base-python /base/python"
        " 'lightning==2.5.1'"
    )
    wheel = plans.ENVS["lightning-35e56ef"].make_command(tmp_path, "python3")
    assert wheel.endswith("--wheels .whl/lightning 'lightning==2.6.2+git35e56ef'")


def test_an_env_with_another_lightning_than_it_was_made_for_is_refused(tmp_path):
    env_with_lightning(tmp_path / "lightning-2.5.1", "2.5.1")
    env_with_lightning(tmp_path / "lightning-2.5.5", "2.5.1")  # made wrong
    plan = plans.find("sigterm-cpu")
    arms = with_envs(list(plan.arms), tmp_path, sys.executable, plan.name)
    allow = {**clean_env(), **plans.ALLOW_OLD}
    with pytest.raises(UsageError) as error:
        check_arms(arms, allow)
    assert str(error.value).endswith(
        "has Lightning 2.5.1, but its env lightning-2.5.5 was made for lightning==2.5.5;"
        " make it again"
    )


def test_a_plan_with_its_envs_runs_each_arm_under_its_env(tmp_path):
    envs = tmp_path / "envs"
    for version in ("2.5.1", "2.5.5"):
        env_with_lightning(envs / f"lightning-{version}", version)
    out = tmp_path / "exp"
    proc = experiment(
        [
            "--plan",
            "sigterm-cpu",
            "--envs",
            str(envs),
            "--repeats",
            "1",
            "--warmup-runs",
            "0",
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    arms = json.loads((out / "manifest.json").read_text())["arms"]
    assert [(a["label"], a["python"]) for a in arms] == [
        ("native", sys.executable),
        ("lightning-2.5.1", str(envs / "lightning-2.5.1" / "bin" / "python")),
        ("lightning-2.5.5", str(envs / "lightning-2.5.5" / "bin" / "python")),
    ]


def test_envs_without_a_plan_is_refused(tmp_path):
    proc = experiment(["--envs", str(tmp_path), "--out", str(tmp_path / "exp")], tmp_path)
    assert proc.returncode == 2 and "--envs needs --plan" in proc.stderr


def test_every_plan_env_names_a_lightning_and_every_arm_a_known_env():
    for plan in plans.PLANS:
        for variant in plan.variants:
            for arm in variant.arms or plan.arms:
                assert arm.env is None or plans.ENVS[arm.env.name] == arm.env
                assert arm.env is None or arm.env.lightning
    assert all(isinstance(a, LabelledArm) for a in plans.find("lightning-versions").arms)
    assert os.sep not in "".join(plans.ENVS)  # env names are folder names
