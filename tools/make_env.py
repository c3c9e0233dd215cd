"""Make a Python environment for one Lightning version that reuses a base interpreter's torch.

    python tools/make_env.py envs/lightning-2.5.5 --base-python /work/main/.venv/bin/python \
        lightning==2.5.5
    python3 tools/make_env.py /tmp/envs/l255 --base-python python3 --wheels .whl lightning==2.5.5

torch is ~5 GB, so an environment never installs it: DEST is a venv of the base's interpreter
whose site-packages ends with a .pth file that adds the base's site-packages after its own.
The env's packages win; everything else (torch, CUDA libraries, numpy, pip) comes from the base.
pip installs the specs and those of their dependencies the base lacks or has at a version they
reject; torch and its family are pinned to the base's versions, so a spec that needs another
torch fails instead of pulling one in. --wheels DIR installs from DIR alone (no network).
Prints the versions the env ended with. A failed run leaves nothing at DEST; user mistakes
are one line on stderr, exit 2. docs/versions.md says how to build a wheel from a commit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common.errors import OneLineParser, UsageError, exit_on_usage_error, one_line

PROG = "make_env"
PTH_NAME = "zz_base_site_packages.pth"  # sorted last: the env's own .pth paths come first
RECORD_NAME = "make-env.json"
# Never installed into an env: pinned to the base's versions (the CUDA libraries are the bulk).
FAMILY = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton")
FAMILY_PREFIXES = ("nvidia-", "cuda-")

# Run by the base interpreter: where its packages are and which of them must not be replaced.
BASE_PROBE = """
import importlib.metadata as m, importlib.util, json, site, sys
print(json.dumps({"version": sys.version.split()[0], "site_dirs": site.getsitepackages(),
                  "pip": importlib.util.find_spec("pip") is not None,
                  "dists": {d.metadata["Name"]: d.version for d in m.distributions()
                            if d.metadata["Name"]}}))
"""
# Run by the env's interpreter: what it imports, and from where.
ENV_PROBE = """
import importlib, json, sys
found = {}
for name in ("torch", "lightning"):
    try:
        module = importlib.import_module(name)
    except ImportError:
        continue
    found[name] = {"version": module.__version__, "file": module.__file__}
print(json.dumps({"python": sys.version.split()[0], "modules": found}))
"""


@dataclass(frozen=True)
class Base:
    """The interpreter whose torch an env reuses."""

    python: Path
    version: str
    site_dirs: tuple[str, ...]
    pinned: dict[str, str]


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_family(name: str) -> bool:
    """True for torch and the packages that come with it (never installed into an env)."""
    name = normalise(name)
    return name in FAMILY or name.startswith(FAMILY_PREFIXES)


def build_parser() -> OneLineParser:
    """The command's options."""
    p = OneLineParser(
        prog=PROG,
        allow_abbrev=False,
        description="Make a venv that installs SPECs (pip requirement specifiers or"
        " wheel files) and reuses the base interpreter's torch.",
    )
    p.add_argument("dest", type=Path, metavar="DEST", help="the env's folder; must not exist")
    p.add_argument("specs", nargs="+", metavar="SPEC", help="e.g. lightning==2.5.5, or a .whl")
    p.add_argument(
        "--base-python",
        required=True,
        metavar="PY",
        help="the interpreter whose torch (and other packages) the env sees",
    )
    p.add_argument(
        "--wheels",
        type=Path,
        metavar="DIR",
        help="install from the wheels in DIR and the base's packages only (no network)",
    )
    p.add_argument("--verbose", action="store_true", help="show pip's output")
    return p


def find_base(text: str) -> Base:
    """The base interpreter, probed; UsageError when it is missing, fails, or lacks torch/pip."""
    found = shutil.which(text) if os.sep not in text else text
    if not found or not Path(found).is_file() or not os.access(found, os.X_OK):
        raise UsageError(f"--base-python {text}: no such interpreter")
    try:
        probe = run_quietly([found, "-c", BASE_PROBE])
        facts = json.loads(probe.stdout) if probe.returncode == 0 else None
    except (OSError, json.JSONDecodeError):
        facts = None
    if facts is None:
        raise UsageError(f"--base-python {text}: cannot run it as Python 3")
    pinned = {normalise(k): v for k, v in facts["dists"].items() if is_family(k)}
    if "torch" not in pinned:
        raise UsageError(f"--base-python {text}: it has no torch, and an env never installs one")
    if not facts["pip"]:
        raise UsageError(f"--base-python {text}: it has no pip to install with")
    return Base(Path(found), facts["version"], tuple(facts["site_dirs"]), pinned)


def clean_environ() -> dict[str, str]:
    """This environment without PYTHONPATH/PYTHONHOME, which would mix other packages in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_json(command: list[str]) -> dict:
    """Run a probe, return what it printed as JSON; UsageError with its last line if it fails."""
    done = run_quietly(command)
    if done.returncode != 0:
        raise UsageError(f"{command[0]} failed: {last_line(done.stderr)}")
    return json.loads(done.stdout)


def run_quietly(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a command in clean_environ(), its output captured; the caller checks the status."""
    return subprocess.run(command, check=False, capture_output=True, text=True, env=clean_environ())


def last_line(text: str) -> str:
    """The last non-empty line of a program's output."""
    return (text.strip().splitlines() or ["no output"])[-1]


def env_python(dest: Path) -> Path:
    """The env's interpreter."""
    return dest / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def make_venv(dest: Path, base: Base) -> Path:
    """An empty venv of the base's interpreter that sees the base's site-packages last.

    `site.addsitedir` (not a bare path line) also runs the base's own .pth files, so the env
    imports what the base imports (an editable install of this suite, for instance).
    """
    done = run_quietly([str(base.python), "-m", "venv", "--without-pip", str(dest)])
    if done.returncode != 0:
        raise UsageError(f"{base.python} -m venv failed: {last_line(done.stderr)}")
    python = env_python(dest)
    purelib = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"
    site_dir = Path(run_json([str(python), "-c", purelib]))
    lines = [f"import site; site.addsitedir({d!r})\n" for d in base.site_dirs]
    (site_dir / PTH_NAME).write_text("".join(lines))
    return site_dir


def pip_install(
    dest: Path, base: Base, specs: list[str], wheels: Path | None, verbose: bool
) -> None:
    """pip install the specs into the env with torch's family pinned; UsageError on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "base-torch.txt"
        constraints.write_text("".join(f"{k}=={v}\n" for k, v in sorted(base.pinned.items())))
        command = [
            str(env_python(dest)),
            "-m",
            "pip",
            "install",
            "--no-input",
            "--no-warn-script-location",
            "-c",
            str(constraints),
        ]
        if wheels is not None:
            command += ["--no-index", "--find-links", str(wheels)]
        done = subprocess.run(
            [*command, *specs],
            check=False,
            env=clean_environ(),
            text=True,
            stdout=None if verbose else subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        reason = pip_error(done.stdout or "") or f"pip exit status {done.returncode}"
        raise UsageError(
            f"{' '.join(specs)} failed to install: {reason.strip()} (--verbose shows pip's output)"
        )


def pip_error(output: str) -> str | None:
    """pip's most telling ERROR line: the last, less its generic closing lines."""
    generic = ("ERROR: Ignored the following", "ERROR: ResolutionImpossible")
    errors = [
        ln for ln in output.splitlines() if ln.startswith("ERROR:") and not ln.startswith(generic)
    ]
    return errors[-1] if errors else (output.strip().splitlines() or [None])[-1]


def installed(site_dir: Path) -> dict[str, str]:
    """The distributions installed into the env itself (not those it sees in the base)."""
    import importlib.metadata

    return {
        d.metadata["Name"]: d.version
        for d in importlib.metadata.distributions(path=[str(site_dir)])
    }


def check_env(dest: Path, site_dir: Path, base: Base) -> dict:
    """What the env imports; UsageError when torch is not the base's, or was installed here."""
    own = installed(site_dir)
    if family := sorted(k for k in own if is_family(k)):
        raise UsageError(
            f"the specs installed {', '.join(family)} into the env; it must reuse the base's torch"
        )
    facts = run_json([str(env_python(dest)), "-c", ENV_PROBE])
    torch = facts["modules"].get("torch")
    if torch is None or inside(torch["file"], dest):
        raise UsageError(f"the env does not import the base's torch ({torch})")
    facts["installed"] = own
    return facts


def origin(file: str, dest: Path) -> str:
    """'env' or 'base', for where a module was imported from."""
    return "env" if inside(file, dest) else "base"


def inside(file: str, folder: Path) -> bool:
    """True when file lies under folder (links resolved)."""
    return Path(file).resolve().is_relative_to(folder.resolve())


def summary(dest: Path, base: Base, facts: dict) -> str:
    """The lines printed when the env is ready."""
    lines = [f"{PROG}: {dest} ready (python {facts['python']}, base {base.python})"]
    for name in ("lightning", "torch"):
        module = facts["modules"].get(name)
        text = (
            "not installed"
            if module is None
            else f"{module['version']} from the {origin(module['file'], dest)} ({module['file']})"
        )
        lines.append(f"  {name}: {text}")
    own = ", ".join(f"{k} {v}" for k, v in sorted(facts["installed"].items())) or "nothing"
    lines.append(f"  installed into the env: {own}")
    return "\n".join(lines)


def make_env(
    dest: Path, base: Base, specs: list[str], wheels: Path | None, verbose: bool = False
) -> dict:
    """Build the env at dest (which must not exist); on any failure remove it again."""
    try:
        dest.mkdir(parents=True)
    except FileExistsError:
        raise UsageError(f"{dest} exists; give a new folder") from None
    except OSError as error:
        raise UsageError(f"{dest}: cannot create it ({error.strerror})") from None
    try:
        site_dir = make_venv(dest, base)
        pip_install(dest, base, specs, wheels, verbose)
        facts = check_env(dest, site_dir, base)
        record = {
            "base_python": str(base.python),
            "specs": specs,
            "wheels": None if wheels is None else str(wheels.resolve()),
            "pinned_from_base": base.pinned,
            **facts,
        }
        (dest / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n")
        return facts
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    with exit_on_usage_error(PROG):
        if args.dest.exists() or args.dest.is_symlink():
            raise UsageError(f"{one_line(str(args.dest))} exists; give a new folder")
        if args.wheels is not None and not args.wheels.is_dir():
            raise UsageError(f"--wheels {args.wheels}: no such folder")
        base = find_base(args.base_python)
        dest = args.dest.absolute()
        facts = make_env(dest, base, args.specs, args.wheels, args.verbose)
        print(summary(dest, base, facts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
