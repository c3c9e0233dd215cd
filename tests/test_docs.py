"""The docs name only things that exist: README.md's and docs/*.md's files, modules and scripts.

The rule, for every Markdown file checked:
- a path is a word that starts with a top-level folder of the repository (`results/...`,
  `slurm/run.sbatch`); in inline code and in link targets every such path must exist (a glob
  must match something), in fenced code blocks the scripts (`.sh`, `.sbatch`, `.py`) must;
- a word with a placeholder (`<job id>`, `{x}`, `$VAR`, `DIR`) is skipped, and so is the word
  after an option that names an output (`--output results/x.json` is made by the command);
- a path at a commit (`44d457a:benchmarks/h200_matrix.sh`, as `git show` takes it) names a file
  as it was: it must exist in that commit (a file since removed can be cited this way);
- link targets are relative to the Markdown file (as a renderer reads them), everything else to
  the repository root;
- every `python -m MODULE` names a module of this repository that can be run (a package with a
  `__main__.py`, or a `.py` file), a module of torch, or one of the tools a test setup runs.
"""

from __future__ import annotations

import glob
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
TOOL_MODULES = {"pytest", "pip", "venv"}
OUTPUT_OPTIONS = {
    "--output",
    "--out",
    "--outdir",
    "--plot",
    "-o",
    ">",
    ">>",
    "--pyprofile",
    "--trace",
}
PLACEHOLDER = re.compile(r"[<>{}$*]|\bDIR\b|\.\.\.")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
AT_COMMIT = re.compile(r"([0-9a-f]{7,40}):([\w./-]+)")
SCRIPT_SUFFIXES = (".sh", ".sbatch", ".py")
TRIM = "\"',;:.)(]["


def top_level_folders() -> set[str]:
    """The repository's top-level folders: those git tracks files in, else those on disk."""
    try:
        files = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = []
    folders = {f.split("/", 1)[0] for f in files if "/" in f}
    if not folders:
        folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return folders


TOP = top_level_folders()


def in_commit(commit: str, path: str) -> bool:
    """path is a file of commit in this repository's history (`git cat-file -e`); without the
    history (an unpacked archive) there is nothing to check against."""
    if not (ROOT / ".git").exists():
        return True
    done = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}:{path}"], capture_output=True
    )
    return done.returncode == 0


def exists(path: Path) -> bool:
    """path exists, or (a glob) matches something."""
    if any(c in str(path) for c in "*?["):
        return bool(glob.glob(str(path)))
    return path.exists()


def words(code: str) -> list[tuple[str, bool]]:
    """(word, names an output) for each whitespace- or '='-separated word of a code span."""
    out, after_output = [], False
    for token in code.split():
        for part in token.split("="):
            word = part.strip(TRIM)
            out.append((word, after_output))
            after_output = False
        after_output = token.split("=", 1)[0] in OUTPUT_OPTIONS or token in OUTPUT_OPTIONS
    return out


def is_repo_path(word: str) -> bool:
    return "/" in word and word.split("/", 1)[0] in TOP and not PLACEHOLDER.search(word)


def is_globbed_path(word: str) -> bool:
    """A repository path with a glob (`results/h200/*/report-*.md`), checked by matching."""
    return (
        "/" in word
        and word.split("/", 1)[0] in TOP
        and not re.search(r"[<>{}$]|\bDIR\b|\.\.\.", word)
    )


def problems(doc: Path, text: str | None = None) -> list[str]:
    """What doc (or text, read as if it were doc) names that does not exist, one line each."""
    text = doc.read_text() if text is None else text
    fenced = FENCE.findall(text)
    prose = FENCE.sub("", text)
    found = []

    def check_path(word: str, base: Path, where: str) -> None:
        word = word.split("::", 1)[0]  # a pytest node id names its file
        at_commit = AT_COMMIT.fullmatch(word)
        if at_commit and at_commit.group(2).split("/", 1)[0] in TOP:
            if not in_commit(*at_commit.groups()):
                found.append(f"{where}: no {at_commit.group(2)} in commit {at_commit.group(1)}")
            return
        if "*" in word and is_globbed_path(word):
            if not exists(base / word):
                found.append(f"{where}: no file matches {word}")
        elif is_repo_path(word) and not exists(base / word):
            found.append(f"{where}: no such path {word}")

    for span in INLINE.findall(prose):
        for word, is_output in words(span):
            if not is_output:
                check_path(word, ROOT, "inline code")
    for block in fenced:
        for word, is_output in words(block):
            if not is_output and word.endswith(SCRIPT_SUFFIXES):
                check_path(word, ROOT, "code block")
    for target in LINK.findall(prose):
        target = target.split("#", 1)[0]
        if not target or re.match(r"[a-z]+:", target):
            continue
        path = (doc.parent / target).resolve()
        try:
            relative = path.relative_to(ROOT)
        except ValueError:
            found.append(f"link: {target} points outside the repository")
            continue
        if not exists(path) and not PLACEHOLDER.search(target):
            found.append(f"link: no such path {target} ({relative})")
    for module in MODULE.findall(text):
        if not runnable(module):
            found.append(f"python -m {module}: not a module of this repository or of torch")
    return list(dict.fromkeys(found))  # each problem once


def runnable(module: str) -> bool:
    """module can be run with `python -m`: a repository module, torch's, or a setup tool."""
    top = module.split(".", 1)[0]
    if top == "torch" or module in TOOL_MODULES:
        return True
    path = ROOT / module.replace(".", "/")
    return (path / "__main__.py").is_file() or path.with_suffix(".py").is_file()


def test_the_rule_reads_paths_commands_and_placeholders():
    found = problems(
        ROOT / "docs" / "probe.md",
        "`results/h200/no-such-file.json`, `results/slurm-<job id>/report.md`,\n"
        "`results/{x}.json`,\n"
        "`python -m native --output results/made-by-the-command.json`, `python -m nosuchmodule`,\n"
        "`python -m torch.distributed.run`, [docs](slurm.md), [gone](../nowhere.md),\n"
        "`tests/test_*.py`, `tests/no_such_*.py`,\n"
        "`tests/test_docs.py::test_docs_name_only_what_exists`, `44d457a:tools/no-such.sh`,\n"
        "`git show 44d457a:benchmarks/h200_matrix.sh`\n"
        "```bash\nbash tools/no-such-script.sh --outdir results/new\n```\n",
    )
    assert found == [
        "inline code: no such path results/h200/no-such-file.json",
        "inline code: no file matches tests/no_such_*.py",
        "inline code: no tools/no-such.sh in commit 44d457a",
        "code block: no such path tools/no-such-script.sh",
        "link: no such path ../nowhere.md (nowhere.md)",
        "python -m nosuchmodule: not a module of this repository or of torch",
    ]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_docs_name_only_what_exists(doc):
    assert problems(doc) == []


def test_the_readme_names_only_what_exists():
    assert problems(ROOT / "README.md") == []
