"""common.source: the digest that names the code a result came from, without git."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import ROOT

from common.source import SOURCE_PACKAGES, source_digest


def copy_tree(dst):
    for package in SOURCE_PACKAGES:
        shutil.copytree(ROOT / package, dst / package, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_a_copy_without_git_has_the_same_digest_and_any_edit_changes_it(tmp_path):
    copy = copy_tree(tmp_path / "copy")
    assert source_digest(copy) == source_digest(ROOT)
    (copy / "native" / "benchmark.py").write_text((copy / "native" / "benchmark.py").read_text() + "\n")
    edited = source_digest(copy)
    assert edited != source_digest(ROOT)
    (copy / "native" / "benchmark.py").rename(copy / "native" / "renamed.py")  # same bytes, new path
    assert source_digest(copy) not in (edited, source_digest(ROOT))


def test_files_outside_the_runner_packages_and_caches_do_not_count(tmp_path):
    copy = copy_tree(tmp_path / "copy")
    (copy / "common" / "__pycache__").mkdir()
    (copy / "common" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (copy / "README.md").write_text("docs")
    assert source_digest(copy) == source_digest(ROOT)


def test_the_command_prints_it():
    proc = subprocess.run([sys.executable, "-m", "common", "source-digest"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    # `DIGEST  PATH`, as sha256sum prints (fdc4108: it names the tree it digested)
    assert proc.returncode == 0 and proc.stdout == f"{source_digest(ROOT)}  {ROOT}\n"
    wrong = subprocess.run([sys.executable, "-m", "common", "nope"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
    assert wrong.returncode == 2 and "source-digest" in wrong.stderr
