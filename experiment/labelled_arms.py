"""The arms an experiment can run, their labels, their interpreters and how each is started.

    --arms native,lightning                         this interpreter's runners
    --arms native,fabric,fabric-torch-autocast      an ablation arm, by its name
    --arms native,lightning@/tmp/envs/l255/bin/python,old=lightning@/tmp/envs/l251/bin/python

An arm may name its own interpreter (RUNNER@PYTHON; a plan names an `Env` under --envs DIR):
the same runner under another Lightning or torch. Each such interpreter is probed before any
run (`check_arms`): it must exist, find the runner and, for a Lightning runner, import
Lightning at a version the runner accepts (its own refusal text, `lightning_impl.compat`),
and the one its env was made for. The probe is a subprocess: this package imports neither
torch nor lightning. An arm with an interpreter and no LABEL= is labelled RUNNER-VERSION
(the probed Lightning, or torch for native).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from common import arms as table
from common.errors import UsageError, one_line
from experiment.together import CannotStart, run_together

DEFAULT_ARMS = ("native", "lightning")
# A label names files (results/<label>-r<k>.json): safe file-name text, no markup, no spaces.
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
PROBE_TIMEOUT_S = 120
PROBE_FACTS = ("found", "lightning", "problem", "torch")
MAKE_ENV = "tools/make_env.py"
WHEELS = ".whl/lightning"  # where the GPU machine keeps the Lightning wheels (docs/versions.md)

# Run by an arm's interpreter with the runs' environment: argv[1] is the runner's module.
# Prints JSON: the module found, the Lightning version and the runner's refusal, torch's version.
PROBE = """
import importlib.metadata as m, importlib.util, json, sys
out = {"found": False, "lightning": None, "problem": None, "torch": None}
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
try:
    out["found"] = importlib.util.find_spec(sys.argv[1]) is not None
    out["torch"] = version("torch")
    if out["found"] and sys.argv[1].startswith("lightning_impl"):
        from common.errors import UsageError
        from lightning_impl import compat
        module = compat.require_lightning()
        out["lightning"] = getattr(module, "__version__", None)
        try:
            compat.check_lightning(module)
        except UsageError as error:
            out["problem"] = str(error)
except Exception as error:
    out["problem"] = f"{type(error).__name__}: {error}"
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Env:
    """A plan's Python environment: its folder name under --envs DIR and what it installs."""

    name: str  # e.g. lightning-2.5.5
    spec: str  # tools/make_env.py's SPEC, e.g. lightning==2.5.5
    wheels: bool = False  # in no index: made from the wheels in WHEELS (docs/versions.md)

    @property
    def lightning(self) -> str | None:
        """The Lightning version the env was made for (from a lightning==X spec)."""
        name, _, version = self.spec.partition("==")
        return version if name.strip() == "lightning" and version else None

    def make_command(self, envs: Path, base: str) -> str:
        """The command that makes this env."""
        wheels = f" --wheels {WHEELS}" if self.wheels else ""
        return f"python {MAKE_ENV} {envs / self.name} --base-python {base}{wheels} '{self.spec}'"


@dataclass(frozen=True)
class LabelledArm:
    """One arm of an experiment: a label, the runner it starts, extra options for it alone,
    and optionally its own interpreter (python) or a plan's env (resolved to python)."""

    label: str  # "" until check_arms names it (an interpreter named without LABEL=)
    runner: str  # the arm of the table it runs (common/arms.py), by its name
    options: tuple[str, ...] = ()
    python: str | None = None  # None: the experiment's --python
    env: Env | None = None
    launch: str | None = None  # "fork" or "fresh" for this arm alone (fork-check); None: --launch

    @property
    def argv(self) -> list[str]:
        """The runner's arguments after the interpreter, before the shared options."""
        arm = table.ARMS[self.runner]
        return ["-m", arm.module, *arm.options, *self.options]


@dataclass(frozen=True)
class Probe:
    """What an arm's interpreter found: its runner, its Lightning (and why not), its torch."""

    found: bool
    lightning: str | None
    problem: str | None
    torch: str | None


def available(runner: str) -> bool:
    """True when the runner's module is present (and Lightning, for Lightning's); no import."""
    module = table.ARMS[runner].module
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return False
    if "." in module:
        folder = Path(next(iter(spec.submodule_search_locations)))
        if not (folder / f"{module.split('.')[-1]}.py").is_file():
            return False
    return top != "lightning_impl" or importlib.util.find_spec("lightning") is not None


def suffixed(name: str, count: int) -> str:
    """The count-th repeat of a label (0: as it is): name-b .. name-z, then name-27, ..."""
    if count == 0:
        return name
    return f"{name}-{chr(ord('a') + count)}" if count < 26 else f"{name}-{count + 1}"


def label_arms(names: list[str]) -> list[LabelledArm]:
    """Arms for names; a name listed again gets -b, -c, ... (A/A: native, native-b)."""
    return unique_labels([LabelledArm("", name) for name in names])


def unique_labels(arms: list[LabelledArm], stems: list[str] | None = None) -> list[LabelledArm]:
    """Blank labels become their stem (by default the runner's name), suffixed where taken; a
    label given twice, or one that is not safe file-name text, is refused."""
    given = [a.label for a in arms if a.label]
    for label in given:
        check_label(label)
        if given.count(label) > 1:
            raise UsageError(f"--arms: label '{label}' is given to two arms; labels are unique")
    taken = set(given)
    named = []
    for arm, stem in zip(arms, stems or [a.runner for a in arms]):
        label, count = arm.label, 0
        while not arm.label and (not label or label in taken):
            label = suffixed(stem, count)
            count += 1
        check_label(label)
        if label in table.ARMS and label != arm.runner:
            raise UsageError(
                f"--arms: label '{label}' names another arm of the arms table (common/arms.py)"
                f" than the one it runs ({arm.runner}); its results would be read as {label}:"
                " give it another label"
            )
        taken.add(label)
        named.append(replace(arm, label=label))
    return named


def check_label(label: str) -> None:
    """UsageError unless label is safe file-name text (it names the arm's files)."""
    if not LABEL.fullmatch(label):
        raise UsageError(
            f"--arms: label '{one_line(label)}' is not a plain name: use 1-64 letters, digits"
            " and . _ + - (starting with a letter or digit); it names the arm's files"
        )


def parse_arm(item: str) -> LabelledArm:
    """One --arms item: [LABEL=]RUNNER[@PYTHON]."""
    head, at, python = item.partition("@")
    label, _, runner = head.rpartition("=")
    label, runner, python = label.strip(), runner.strip(), python.strip()
    if runner not in table.ARMS:
        raise UsageError(
            f"--arms: unknown arm '{one_line(runner)}'; choose from {', '.join(table.ARMS)} or all"
            " ([LABEL=]RUNNER[@PYTHON]; the arms: common/arms.py)"
        )
    if at and not python:
        raise UsageError(f"--arms: '{one_line(item)}' names no interpreter after @")
    if label:
        check_label(label)
    if not python and not available(runner):
        raise UsageError(
            f"--arms: arm '{runner}' is not available here"
            f" (module {table.ARMS[runner].module} or Lightning missing)"
        )
    # the path the runs use and the manifest records: ~ expanded, made absolute
    return LabelledArm(
        label, runner, python=str(Path(python).expanduser().absolute()) if python else None
    )


def parse_arms(text: str) -> list[LabelledArm]:
    """--arms: comma-separated [LABEL=]RUNNER[@PYTHON] items, or `all`; UsageError with the
    one-line reason. Arms with an interpreter and no label are named by check_arms."""
    if not text.strip():
        raise UsageError("--arms is empty; name the arms, e.g. --arms native,lightning")
    if text == "all":  # the runners as they are; ablation arms are named, or a plan's
        arms = [LabelledArm("", a) for a in table.MAIN if available(a)]
    else:
        arms = [parse_arm(item) for item in text.split(",")]
    if len(arms) < 2:
        raise UsageError(
            "--arms needs at least two arms (the baseline first), e.g. native,lightning"
        )
    if any(a.python and not a.label for a in arms):
        return arms
    return unique_labels(arms)


def with_envs(
    arms: list[LabelledArm], envs: Path | None, base: str, plan: str
) -> list[LabelledArm]:
    """A plan's arms with each env's interpreter (DIR/<env>/bin/python); UsageError naming the
    command that makes a missing env."""
    needed = list(dict.fromkeys(a.env for a in arms if a.env is not None))
    if needed and envs is None:
        raise UsageError(
            f"--plan {plan}: its arms run in their own environments"
            f" ({', '.join(e.name for e in needed)}); give --envs DIR, the folder that holds"
            f" them (made by {MAKE_ENV}, docs/versions.md)"
        )
    found = []
    for arm in arms:
        if arm.env is not None and envs is not None:
            python = envs.absolute() / arm.env.name / "bin" / "python"
            if not python.exists():
                raise UsageError(
                    f"--envs {envs}: no environment {arm.env.name} ({python} is missing);"
                    f" make it: {arm.env.make_command(envs, base)}"
                )
            arm = replace(arm, python=str(python))
        found.append(arm)
    return found


PROBED: dict[tuple[str, str, tuple[tuple[str, str], ...]], Probe] = {}


def probe_all(pythons: list[tuple[str, str]], env: dict[str, str]) -> list[Probe]:
    """Run the PROBE under each (python, runner) with the runs' environment, side by side;
    UsageError for the first that cannot run."""
    commands: list[tuple[list[str], dict[str, str]]] = []
    for python, runner in pythons:
        where = f"--arms: {runner}@{one_line(python)}"
        path = Path(python)
        if not path.is_file():
            raise UsageError(f"{where}: no such interpreter")
        if not os.access(path, os.X_OK):
            raise UsageError(f"{where}: the interpreter is not executable")
        commands.append(([python, "-c", PROBE, table.ARMS[runner].module], env))
    try:
        finished = run_together(commands, PROBE_TIMEOUT_S, merge_stderr=False)
    except CannotStart as failed:
        raise UsageError(_cannot_run(*pythons[failed.index])) from None
    probes = []
    for (python, runner), done in zip(pythons, finished, strict=True):
        facts = None
        if done.returncode == 0:
            with contextlib.suppress(json.JSONDecodeError, IndexError):
                facts = json.loads(done.output.strip().splitlines()[-1])
        if not isinstance(facts, dict):
            raise UsageError(_cannot_run(python, runner))
        probes.append(Probe(**{k: facts.get(k) for k in PROBE_FACTS}))
    return probes


def _cannot_run(python: str, runner: str) -> str:
    return f"--arms: {runner}@{one_line(python)}: cannot run it as Python 3"


def check_arms(arms: list[LabelledArm], env: dict[str, str]) -> list[LabelledArm]:
    """Probe every arm's own interpreter (env: the runs' environment) and name the unnamed:
    UsageError, one line, for an interpreter that is missing, cannot import the runner, has a
    Lightning the runner refuses, or not the Lightning its env was made for."""

    def key(arm: LabelledArm) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        return (str(arm.python), table.ARMS[arm.runner].module, tuple(sorted(env.items())))

    todo: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[str, str]] = {}
    for arm in arms:  # a plan's variants share their interpreters: each is probed once
        if arm.python is not None and key(arm) not in PROBED:
            todo.setdefault(key(arm), (arm.python, arm.runner))
    PROBED.update(zip(todo, probe_all(list(todo.values()), env), strict=True))
    stems = []
    for arm in arms:
        stems.append(arm.runner)
        if arm.python is None:
            continue
        found = PROBED[key(arm)]
        where = f"--arms: {arm.label or arm.runner}@{one_line(arm.python)}"
        if not found.found:
            raise UsageError(f"{where}: cannot import the runner ({table.ARMS[arm.runner].module})")
        if found.problem:
            raise UsageError(f"{where}: {one_line(found.problem)}")
        expected = arm.env.lightning if arm.env else None
        if expected is not None and found.lightning != expected:
            raise UsageError(
                f"{where}: has Lightning {found.lightning}, but its env {arm.env.name} was made"
                f" for {arm.env.spec}; make it again"
            )
        version = found.lightning if table.ARMS[arm.runner].module != "native" else found.torch
        stems[-1] = f"{arm.runner}-{version}"
    return unique_labels(arms, stems)
