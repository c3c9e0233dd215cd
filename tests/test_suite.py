"""The suite's own rules (tests/conftest.py): a test over 30 s without `slow` fails; a Monte
Carlo test that cuts its repetitions carries `exhaustive`; the helpers refuse what they say."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env, refusal, repetitions

TESTS = ROOT / "tests"
TIMED = """
import time

import pytest

import conftest

conftest.SLOW_SECONDS = 0.05  # the check's rule, at a scale a test can show


def test_over_the_limit_unmarked():
    time.sleep(1.0)


@pytest.mark.slow
def test_over_the_limit_marked_slow():
    time.sleep(1.0)


def test_within_the_limit():
    pass
"""


def test_a_test_over_the_limit_without_slow_fails_naming_its_time(tmp_path):
    (tmp_path / "test_timed.py").write_text(TIMED)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider"]
        + [
            "-o",
            "addopts=",
            "-rf",
            "-W",
            "ignore::pytest.PytestUnknownMarkWarning",
            "test_timed.py",
        ],
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(TESTS)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 2 passed" in proc.stdout, proc.stdout
    assert "FAILED test_timed.py::test_over_the_limit_unmarked" in proc.stdout
    assert "without the `slow` marker: mark it @pytest.mark.slow" in proc.stdout


def test_every_test_file_that_cuts_repetitions_carries_the_exhaustive_marker():
    """A test that calls repetitions() is run in full by make test-exhaustive only if it is
    marked: its module's pytestmark, or a decorator of the function that calls it."""
    for path in sorted(TESTS.glob("*.py")):
        tree = ast.parse(path.read_text())
        if path.name == "conftest.py" or not any(
            isinstance(n, ast.Call) and getattr(n.func, "id", None) == "repetitions"
            for n in ast.walk(tree)
        ):
            continue
        text = path.read_text()
        assert "pytest.mark.exhaustive" in text, f"{path.name} calls repetitions() unmarked"
        if "pytestmark" not in text or "exhaustive" not in text.split("pytestmark", 1)[1][:200]:
            for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
                calls = [
                    n
                    for n in ast.walk(fn)
                    if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "repetitions"
                ]
                marks = [ast.unparse(d) for d in fn.decorator_list]
                assert not calls or "pytest.mark.exhaustive" in marks, (path.name, fn.name)


@pytest.mark.exhaustive
def test_repetitions_are_the_quick_count_unless_exhaustive(request):
    full = request.config.getoption("--exhaustive")
    assert repetitions(4000, 500) == (4000 if full else 500)


def test_an_in_process_refusal_starts_no_process_and_leaves_the_environment():
    before = dict(os.environ)

    def starts_one(argv: list[str]) -> int:
        subprocess.Popen(["true"])
        return 0

    with pytest.raises(AssertionError, match="a refused command line started a process"):
        refusal(starts_one, [])
    with pytest.raises(AssertionError):  # exit status 0 is no refusal

        def accepts(argv: list[str]) -> int:
            print("fine")
            return 0

        refusal(accepts, [])

    def refuses(argv: list[str]) -> int:
        assert os.environ["MY_VARIABLE"] == "x" and "SLURM_JOB_ID" not in os.environ
        os.environ["SET_FOR_THE_RANKS"] = "1"  # as a runner does before it fails: not kept
        print(f"prog: error: {argv[0]} is wrong", file=sys.stderr)
        raise SystemExit(2)

    assert refusal(refuses, ["--x"], MY_VARIABLE="x") == "prog: error: --x is wrong\n"
    assert dict(os.environ) == before


def test_the_committed_architecture_tables_are_named_for_their_torchvision():
    import json

    import architectures

    tables = sorted((TESTS / "data" / "architectures").glob("torchvision-*.json"))
    assert tables, "no committed table"
    for path in tables:
        doc = json.loads(path.read_text())
        assert path == architectures.table_path(doc["torchvision"])
        assert doc["batches"] == list(architectures.BATCHES)
        assert doc["sizes"] == list(architectures.SIZES)
        assert all(
            row is None or set(row) == {str(b) for b in architectures.BATCHES}
            for row in doc["architectures"].values()
        )
