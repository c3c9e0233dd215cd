"""Teaching: identical CLIs; the README's responsibility table matches the `# DDP:` marks."""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env, needs_lightning, run_module

TABLE_HEADING = "## Who does what: the DDP responsibilities"


RUNNERS = {
    "native": "native.benchmark",
    "fabric": "lightning_impl.fabric",
    "lightning": "lightning_impl.trainer",
}
PROGRAMS = {"native": "native", "fabric": "lightning_impl.fabric", "lightning": "lightning_impl"}
LIGHTNING_SIDES = [pytest.param(side, marks=needs_lightning) for side in ("fabric", "lightning")]
WIDTH = 100  # `diff -y -W 210` shows two 100-column files whole
RATIO = 1.3  # each Lightning runner at most this many times native's lines


def source_path(module: str):
    return ROOT / (module.replace(".", "/") + ".py")


def responsibility_rows() -> list[tuple[str, str, str, str]]:
    """(mark, native, fabric, trainer function) for each row of the README table."""
    text = (ROOT / "README.md").read_text()
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`"):
            names = [re.search(r"`([^`]+)`", c) for c in cells[:4]]
            rows.append(tuple(n.group(1) for n in names))
    return rows


def resolve(module: str, dotted: str):
    obj = importlib.import_module(module)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_table_names_every_responsibility():
    marks = {row[0] for row in responsibility_rows()}
    assert marks == {
        "process launch",
        "process group",
        "device placement",
        "model wrapper",
        "data per rank",
        "mixed precision",
        "backward and optimizer step",
        "timing and reporting",
        "teardown",
    }


def test_the_readme_says_how_to_read_the_diff():
    section = (ROOT / "README.md").read_text().split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    assert "diff -y -W 210 native/benchmark.py lightning_impl/fabric.py" in section


@pytest.mark.parametrize("side", ["native", *LIGHTNING_SIDES])
def test_each_named_function_exists_and_carries_its_mark(side):
    column = {"native": 1, "fabric": 2, "lightning": 3}[side]
    for row in responsibility_rows():
        mark, name = row[0], row[column]
        fn = resolve(RUNNERS[side], name)
        assert f"# DDP: {mark}" in inspect.getsource(fn), (
            f"{RUNNERS[side]}.{name} lacks '# DDP: {mark}'"
        )


@pytest.mark.parametrize("side", ["native", *LIGHTNING_SIDES])
def test_every_mark_in_a_runner_is_a_row_of_the_table(side):
    marks = {row[0] for row in responsibility_rows()}
    found = set(re.findall(r"# DDP: ([a-z ]+?) --", source_path(RUNNERS[side]).read_text()))
    assert found and found <= marks


@needs_lightning
def test_all_runners_have_the_same_help_but_the_program_name():
    helps = {side: run_module(prog, ["--help"]).stdout for side, prog in PROGRAMS.items()}
    assert helps["native"]
    for side, prog in PROGRAMS.items():
        assert helps[side] == helps["native"].replace("usage: native", f"usage: {prog}"), side


@pytest.mark.parametrize(
    "path",
    [
        "native/benchmark.py",
        "native/launch.py",
        "lightning_impl/trainer.py",
        "lightning_impl/fabric.py",
        "lightning_impl/workarounds.py",
        "lightning_impl/services.py",
        "lightning_impl/compat.py",
    ],
)
def test_runner_lines_fit_one_pane_of_a_side_by_side_diff(path):
    wide = [
        n for n, line in enumerate((ROOT / path).read_text().splitlines(), 1) if len(line) > WIDTH
    ]
    assert wide == [], f"{path}: lines wider than {WIDTH} columns: {wide}"


@pytest.mark.parametrize("side", ["fabric", "lightning"])
def test_each_lightning_runner_is_at_most_1_3_times_natives_length(side):
    # native parses and checks in native/launch.py's main(), which the Lightning runners do in
    # their own main(): those lines count on native's side too
    from native import launch

    native = len(source_path(RUNNERS["native"]).read_text().splitlines())
    native += len(inspect.getsource(launch.main).splitlines())
    other = len(source_path(RUNNERS[side]).read_text().splitlines())
    assert other <= RATIO * native, f"{side}: {other} lines against native's {native}"


def changed_code_blocks(side: str) -> list[list[str]]:
    """The Lightning runner's blocks of lines that differ from native's (difflib), code only."""
    native = source_path(RUNNERS["native"]).read_text().splitlines()
    other = source_path(RUNNERS[side]).read_text().splitlines()
    body = next(n for n, line in enumerate(other) if line.startswith("from __future__"))
    blocks = []
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(
        None, native, other, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "insert") and j2 > body:
            block = other[max(j1 - 1, body) : j2]  # the line before may say what the block replaces
            code = [
                line
                for line in other[max(j1, body) : j2]
                if line.strip() and not line.lstrip().startswith(('"""', "def ", "class "))
            ]
            if code:
                blocks.append(block)
    return blocks


@pytest.mark.parametrize("side", ["fabric", "lightning"])
def test_each_changed_line_says_what_it_replaces(side):
    silent = [
        block
        for block in changed_code_blocks(side)
        if not any(
            "native" in line or "# DDP:" in line or "--no-barebones" in line for line in block
        )
    ]
    assert silent == [], f"{side}: blocks that do not say what they replace: {silent}"


def top_level_functions(module: str) -> list[str]:
    """Functions defined in `module`, in source order."""
    return [
        name
        for name, obj in vars(importlib.import_module(module)).items()
        if inspect.isfunction(obj) and obj.__module__ == module
    ]


@needs_lightning
def test_top_level_functions_line_up_for_diff_and_shared_names_do_the_same_job():
    shared = ["main", "ddp_setup", "build", "train_step", "run"]
    for module in ("native.benchmark", "lightning_impl.fabric"):
        assert [n for n in top_level_functions(module) if n in shared] == shared, module
    # The Trainer joins the process group and wraps the model itself, inside fit(): its file has
    # no ddp_setup, build or train_step; a Trainer and a LightningModule stand in their places.
    assert top_level_functions("lightning_impl.trainer") == ["main", "trainer_setup", "run"]


@pytest.mark.parametrize("prog", ["lightning_impl", "lightning_impl.fabric"])
def test_lightning_missing_exits_2_with_the_install_hint(prog):
    blocker = (
        "import sys, runpy\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'lightning' or name.startswith('lightning.'):\n"
        "            raise ImportError('blocked for the test')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"sys.argv = ['{prog}', '--accelerator', 'cpu']\n"
        f"runpy.run_module('{prog}', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", blocker],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"{prog}: error: Lightning is not installed; install the extra: pip install '.[lightning]'"
    )
