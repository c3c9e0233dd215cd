"""The teaching side: identical CLIs, the README's responsibility table matches the `# DDP:` marks."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, needs_lightning, run_module

TABLE_HEADING = "## Who does what: the DDP responsibilities"


def responsibility_rows() -> list[tuple[str, str, str]]:
    """(mark, native function, lightning function) for each row of the README table."""
    text = (ROOT / "README.md").read_text()
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            names = [re.search(r"`([^`]+)`", c) for c in cells[:3]]
            rows.append(tuple(n.group(1) for n in names))
    return rows


def resolve(module: str, dotted: str):
    obj = importlib.import_module(module)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_table_names_every_responsibility():
    marks = {row[0] for row in responsibility_rows()}
    assert marks == {"process launch", "process group", "device placement", "model wrapper", "data per rank",
                     "mixed precision", "backward and optimizer step", "timing and reporting", "teardown"}


@pytest.mark.parametrize("side", ["native", pytest.param("lightning", marks=needs_lightning)])
def test_each_named_function_exists_and_carries_its_mark(side):
    module = {"native": "native.benchmark", "lightning": "lightning_impl.benchmark"}[side]
    for mark, native_fn, lightning_fn in responsibility_rows():
        fn = resolve(module, native_fn if side == "native" else lightning_fn)
        assert f"# DDP: {mark}" in inspect.getsource(fn), f"{module}.{fn.__qualname__} lacks '# DDP: {mark}'"


@needs_lightning
def test_both_runners_have_the_same_help_but_the_program_name():
    native = run_module("native", ["--help"]).stdout
    lightning = run_module("lightning_impl", ["--help"]).stdout
    assert native and native.replace("usage: native", "usage: lightning_impl") == lightning


def top_level_functions(module: str) -> list[str]:
    """Functions defined in `module`, in source order."""
    return [name for name, obj in vars(importlib.import_module(module)).items()
            if inspect.isfunction(obj) and obj.__module__ == module]


@needs_lightning
def test_top_level_functions_line_up_for_diff():
    shared = ["main", "ddp_setup", "build", "train_step", "run"]
    for module in ("native.benchmark", "lightning_impl.benchmark"):
        assert [n for n in top_level_functions(module) if n in shared] == shared, module


def test_lightning_missing_exits_2_with_the_install_hint():
    blocker = ("import sys, runpy\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'lightning' or name.startswith('lightning.'):\n"
               "            raise ImportError('blocked for the test')\n"
               "sys.meta_path.insert(0, Block())\n"
               "sys.argv = ['lightning_impl', '--accelerator', 'cpu']\n"
               "runpy.run_module('lightning_impl', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("lightning_impl: error: Lightning is not installed; install the extra:"
                                   " pip install '.[lightning]'")


def test_common_native_and_compare_never_import_lightning():
    code = ("import sys, common.report, common.launcher, native.benchmark, compare.cli\n"
            "assert not [m for m in sys.modules if m == 'lightning' or m.startswith('lightning.')]\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean_env(), check=True, timeout=120)
