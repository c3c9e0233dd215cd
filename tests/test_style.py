"""Style: `ruff check .` and `ruff format --check .` pass (pyproject.toml's [tool.ruff])."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def ruff(*args: str) -> subprocess.CompletedProcess:
    """Run the ruff of this interpreter's environment (the `test` extra installs it)."""
    if importlib.util.find_spec("ruff") is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("ruff is not installed; CI installs it with the `test` extra")
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_check_passes():
    proc = ruff("check", "--no-cache", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    proc = ruff("format", "--no-cache", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr
