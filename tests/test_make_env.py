"""tools/make_env.py: an env per version that reuses the base's torch and never installs one.

The base here is a throwaway venv holding a stand-in `torch` wheel, so the tests need no network,
never touch a real environment, and take seconds; one slow test installs a real Lightning.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "make_env.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("make_env", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_env"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one module `name` whose __version__ is `version`."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": "".join(
            [
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                *(f"Requires-Dist: {r}\n" for r in requires),
            ]
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}\n")
    files[f"{info}/RECORD"] = "".join(record) + f"{info}/RECORD,,\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def environ() -> dict[str, str]:
    """This environment without the machine's pip configuration (indexes, constraints)."""
    return {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    make_wheel(folder, "torch", "9.9.0")
    make_wheel(folder, "torch", "10.0.0")  # what a spec wanting another torch would pull in
    make_wheel(folder, "shadowme", "1.0")
    make_wheel(folder, "shadowme", "2.0")
    make_wheel(folder, "tinyapp", "1.0", ("torch>=9", "shadowme>=1"))
    make_wheel(folder, "newtorchapp", "1.0", ("torch>=10",))
    return folder


@pytest.fixture(scope="module")
def base(tmp_path_factory, wheels) -> Path:
    """A venv with pip, torch 9.9.0 (a stand-in) and shadowme 1.0: what an env reuses."""
    venv = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=environ())
    subprocess.run(
        [
            str(python_of(venv)),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(wheels),
            "torch==9.9.0",
            "shadowme==1.0",
        ],
        check=True,
        env=environ(),
    )
    return python_of(venv)


def make_env(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        env=environ(),
        timeout=300,
    )


def imported(python: Path, module: str) -> tuple[str, str]:
    """(version, file) of `module` as `python` imports it."""
    code = f"import {module} as m; print(m.__version__); print(m.__file__)"
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, env=environ()
    )
    version, file = done.stdout.split()
    return version, file


def test_env_installs_the_spec_and_reuses_the_bases_torch(tmp_path, base, wheels):
    dest = tmp_path / "env"
    done = make_env(dest, "--base-python", base, "--wheels", wheels, "tinyapp==1.0")
    assert done.returncode == 0, done.stderr
    assert "torch: 9.9.0 from the base" in done.stdout
    assert "installed into the env: tinyapp 1.0" in done.stdout  # not torch, not shadowme
    assert imported(python_of(dest), "tinyapp")[1].startswith(str(dest))
    assert not imported(python_of(dest), "torch")[1].startswith(str(dest))
    assert (dest / "make-env.json").is_file()


def test_the_envs_own_version_wins_and_the_base_is_untouched(tmp_path, base, wheels):
    dest = tmp_path / "env"
    done = make_env(dest, "--base-python", base, "--wheels", wheels, "shadowme==2.0")
    assert done.returncode == 0, done.stderr
    assert imported(python_of(dest), "shadowme")[0] == "2.0"
    assert imported(base, "shadowme")[0] == "1.0"  # pip never uninstalls the base's copy


def test_a_spec_that_needs_another_torch_is_refused_and_leaves_nothing(tmp_path, base, wheels):
    dest = tmp_path / "env"
    done = make_env(dest, "--base-python", base, "--wheels", wheels, "newtorchapp==1.0")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("make_env: error: newtorchapp==1.0 failed to install: ERROR:")
    assert not dest.exists()
    assert imported(base, "torch")[0] == "9.9.0"


def test_a_spec_that_is_not_there_is_refused_and_leaves_nothing(tmp_path, base, wheels):
    dest = tmp_path / "env"
    done = make_env(dest, "--base-python", base, "--wheels", wheels, "nosuchpackage==1.0")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "make_env: error: nosuchpackage==1.0 failed to install: ERROR: No"
        " matching distribution found for nosuchpackage==1.0 (--verbose shows"
        " pip's output)\n"
    )
    assert not dest.exists()


def test_an_existing_dest_is_refused_and_left_alone(tmp_path, base, wheels):
    dest = tmp_path / "env"
    dest.mkdir()
    (dest / "keep").write_text("mine")
    done = make_env(dest, "--base-python", base, "--wheels", wheels, "tinyapp==1.0")
    expected = f"make_env: error: {dest} exists; give a new folder\n"
    assert (done.returncode, done.stderr) == (2, expected)
    assert [p.name for p in dest.iterdir()] == ["keep"]


@pytest.mark.parametrize("problem", ["missing", "not python", "no torch"])
def test_an_unusable_base_interpreter_is_refused(tmp_path, wheels, problem):
    if problem == "missing":
        python, reason = tmp_path / "nope" / "python", "no such interpreter"
    elif problem == "not python":
        python, reason = Path("/bin/true"), "cannot run it as Python 3"
    else:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True
        )
        python, reason = python_of(tmp_path / "bare"), "it has no torch"
    done = make_env(tmp_path / "env", "--base-python", python, "--wheels", wheels, "tinyapp==1.0")
    assert done.returncode == 2 and done.stderr.startswith(
        f"make_env: error: --base-python {python}: {reason}"
    ), done.stderr
    assert not (tmp_path / "env").exists()


def test_a_missing_wheel_folder_is_refused(tmp_path):
    done = make_env(
        tmp_path / "env", "--base-python", sys.executable, "--wheels", tmp_path / "none", "x"
    )
    expected = f"make_env: error: --wheels {tmp_path / 'none'}: no such folder\n"
    assert (done.returncode, done.stderr) == (2, expected)


def test_pips_telling_error_line_is_the_one_reported():
    tool = load_tool()
    output = (
        "ERROR: Ignored the following yanked versions: 1.0\n"
        "ERROR: Cannot install a==1 because these package versions have conflicts.\n"
        "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io\n"
    )
    assert tool.pip_error(output).startswith("ERROR: Cannot install a==1")
    assert tool.is_family("nvidia-cudnn-cu13") and tool.is_family("Triton")
    assert not tool.is_family("torchmetrics")


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
    except OSError:
        return False
    return True


@pytest.mark.slow
def test_a_lightning_release_from_pypi_runs_on_this_interpreters_torch(tmp_path):
    if importlib.util.find_spec("torch") is None or not pypi_reachable():
        pytest.skip("needs torch here and pypi.org")
    dest = tmp_path / "env"
    done = subprocess.run(
        [sys.executable, str(TOOL), str(dest), "--base-python", sys.executable, "lightning==2.5.5"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "lightning: 2.5.5 from the env" in done.stdout
    assert "torch:" in done.stdout and "from the base" in done.stdout
