"""Shared test helpers and the suite's tiers.

- `run_module`: a runner as a subprocess with an explicit, small CPU setup (`clean_env`).
- `refusal`: a program's main() refusing a command line in this process (exit 2, one line).
- `corpus` (session fixture): CPU runs of the arms, forked from one warm interpreter and
  shared by every test that reads them.
- Tiers: `slow` (multi-process runs; `make test-fast` leaves them out), `exhaustive` (the
  tests whose work is cut on every run and done in full by `make test-exhaustive`, i.e.
  `pytest --exhaustive -m exhaustive`): a Monte Carlo test takes its repetitions from
  `repetitions(full, quick)` and carries the marker. A test over SLOW_SECONDS without `slow`
  fails (`pytest_runtest_makereport` below says how the time is judged).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The image workload the runs here train: a ResNet-18 (the default ResNet-50's family, with its
# BatchNorm buffers and residual blocks) on 32 px images of 10 classes. A run's work is then
# under a second beside its imports; ResNet-50 on 64 px cost about a second more of CPU a rank.
# tests/test_end_to_end.py still runs the default arch.
SMALL_IMAGE = ["--arch", "resnet18", "--num-classes", "10", "--image-size", "32"]
# A 2-rank CPU run of it: seconds on two cores, mostly importing torch.
TINY = [
    "--accelerator",
    "cpu",
    *SMALL_IMAGE,
    "--batch-size-per-device",
    "2",
    "--warmup-steps",
    "2",
    "--steps",
    "3",
]
# What the runs of the Slurm and multi-node tests take (slurm/pair.sbatch and slurm/sweep.sh
# derive the accelerator and the batch from the job): a warm-up step and two timed.
JOB_TINY = [*SMALL_IMAGE, "--warmup-steps", "1", "--steps", "2"]


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without launcher variables, one thread per rank."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "TORCHELASTIC_", "DDPBENCH_"))
        and k
        not in (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "GROUP_RANK",
            # torch sets it in any process that imported TorchDynamo (this one, once a test
            # did): passed on, an experiment would take it for the user's own compile cache
            "TORCHINDUCTOR_CACHE_DIR",
        )
    }
    # The suite first; keep an existing PYTHONPATH (packages installed with --target, e.g.)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONPATH=path)
    env.update(extra)
    return env


def run_module(
    module: str,
    args: list[str],
    timeout: float = 240,
    env: dict[str, str] | None = None,
    launcher: list[str] | None = None,
) -> subprocess.CompletedProcess:
    """`python -m module args` (or under `launcher`), capturing text output."""
    cmd = [*(launcher or [sys.executable]), "-m", module, *args]
    return subprocess.run(
        cmd, cwd=ROOT, env=env or clean_env(), capture_output=True, text=True, timeout=timeout
    )


def lightning_installed() -> bool:
    """True when the optional Lightning extra is installed: found, not imported (importing it
    costs seconds, which every pytest process would pay before its first test)."""
    import importlib.util

    return importlib.util.find_spec("lightning") is not None


needs_lightning = pytest.mark.skipif(
    not lightning_installed(), reason="Lightning extra not installed"
)


# --- tiers: --exhaustive, repetitions, and the slow marker's 30 seconds ----------------------

_EXHAUSTIVE = False  # pytest --exhaustive (set in pytest_configure, before any test imports)
SLOW_SECONDS = 30.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="the exhaustive tier at full size: Monte Carlo tests at their full repetitions,"
        " the architecture table derived anew (make test-exhaustive)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _EXHAUSTIVE
    _EXHAUSTIVE = bool(config.getoption("--exhaustive"))


def exhaustive() -> bool:
    """True under `pytest --exhaustive` (make test-exhaustive)."""
    return _EXHAUSTIVE


def repetitions(full: int, quick: int) -> int:
    """A Monte Carlo test's repetitions: `full` under --exhaustive, else `quick`, the fewest at
    which its bounds (computed from the count it gets) still tell the method from the failure
    it pins. A test that calls this carries the `exhaustive` marker (test_suite.py checks)."""
    return full if _EXHAUSTIVE else quick


_SETUP_SECONDS = pytest.StashKey[float]()  # a test's setup time, until its call is reported


def _time_limit() -> float:
    """SLOW_SECONDS, stretched by how far the machine was overloaded while the test ran: its
    1-minute load average over the CPUs this process may use, where that exceeds 1 (then each
    runnable process gets a share of a CPU, and every wall time grows by that factor)."""
    cpus = len(os.sched_getaffinity(0))
    return SLOW_SECONDS * max(1.0, os.getloadavg()[0] / cpus)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test that passed but took over SLOW_SECONDS (its setup, module fixtures included, and
    its call) without the `slow` marker fails, naming its time. Wall time, so that waiting
    counts; judged against `_time_limit`, so that other work on the machine does not fail it
    (the durations shown by --durations are the plain ones). Exempt under --exhaustive: that
    tier is long by design."""
    report = yield
    if report.when == "setup":
        item.stash[_SETUP_SECONDS] = report.duration
    elif report.when == "call" and report.passed and not _EXHAUSTIVE:
        took = item.stash.get(_SETUP_SECONDS, 0.0) + report.duration
        limit = _time_limit()
        if took > limit and item.get_closest_marker("slow") is None:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} took {took:.1f} s (setup and call), over {limit:.0f} s"
                f" ({SLOW_SECONDS:.0f} s on an idle machine), without the `slow` marker:"
                " mark it @pytest.mark.slow (make test-fast leaves it out) or make it faster"
            )
    return report


# --- parallel runs (pytest-xdist, make test: -n 2 --dist loadgroup) ---------------------------

# A file's tests run on one worker (its module fixtures are made once); these files share one
# worker: the corpus's fresh runs, and the local Slurm's two files, whose jobs share its two
# nodes: on one worker one job at a time runs there, so the time bounds the tests set a job hold.
XDIST_GROUPS = {
    "test_end_to_end.py": "corpus",
    "test_ablations.py": "corpus",
    "test_interleaved.py": "corpus",
    "test_slurm.py": "slurm",
    "test_multinode.py": "slurm",
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            name = item.path.name
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUPS.get(name, name)))


def local_slurm() -> None:
    """The two-node local Slurm of tools/slurm-local.sh, which the Slurm and the multi-node tests
    share, started if needed (idempotent): skips without root, or without Slurm and apt-get to
    install it; fails if it cannot start."""
    if os.geteuid() != 0:
        pytest.skip("the local Slurm (tools/slurm-local.sh) needs root")
    if not shutil.which("sbatch") and not shutil.which("apt-get"):
        pytest.skip("no Slurm and no apt-get to install it")
    try:
        proc = subprocess.run(
            [str(ROOT / "tools" / "slurm-local.sh"), "start"],
            env={**os.environ, "SLURM_LOCAL_NODES": "2"},
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("tools/slurm-local.sh start did not finish within 600 s")
    if proc.returncode != 0:
        # Root with apt-get: Slurm can be installed, so a failed start is a failure, not a skip.
        pytest.fail(f"tools/slurm-local.sh start failed:\n{proc.stdout}{proc.stderr}")


# --- refusals in this process --------------------------------------------------------------


def _no_process(*args: object, **kwargs: object) -> None:
    raise AssertionError("a refused command line started a process")


# The function each `python -m PROGRAM` runs, for refusal()
MAINS = {
    "native": "native.launch",
    "lightning_impl": "lightning_impl.trainer",
    "lightning_impl.fabric": "lightning_impl.fabric",
    "lightning_impl.interleaved": "lightning_impl.interleaved",
    "experiment": "experiment.cli",
    "compare": "compare.cli",
}


def refusal(program: str | Callable[[list[str]], int | None], argv: list[str], **env: str) -> str:
    """`python -m PROGRAM ARGV` (a key of MAINS; or a main function) run as its main(argv) in
    this process, under clean_env(**env), refused: exit status 2, one line on stderr, nothing
    on stdout, no process started (subprocess.Popen and os.fork fail here); the line. The cheap
    form of a subprocess's refusal: each program keeps one subprocess test of its own for what
    only a process shows (nothing imported, the real streams). A launcher's variables are
    followed without asking the kernel to signal pytest."""
    import importlib

    from common import lifetime

    main = importlib.import_module(MAINS[program]).main if isinstance(program, str) else program

    out, err = io.StringIO(), io.StringIO()
    given, saved = clean_env(**env), dict(os.environ)
    os.environ.clear()
    os.environ.update(given)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(subprocess, "Popen", _no_process)
            mp.setattr(os, "fork", _no_process)
            mp.setattr(lifetime, "_parent_death_signal", lambda signum: True)
            mp.setattr(lifetime, "_gone", _no_process)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as stop:
                    code = stop.code
    finally:  # exactly as it was: a program sets variables for its ranks (os.environ[...])
        os.environ.clear()
        os.environ.update(saved)
    assert code == 2, (code, out.getvalue(), err.getvalue())
    assert out.getvalue() == "", out.getvalue()
    assert err.getvalue().count("\n") == 1 and err.getvalue().endswith("\n"), err.getvalue()
    assert "Traceback" not in err.getvalue()
    return err.getvalue()


# --- the corpus: CPU runs of the arms, forked from one warm interpreter ----------------------

CORPUS_RUN_TIMEOUT_S = 600


@dataclass(frozen=True)
class CorpusRun:
    """One run of the corpus: its result, its folder (result.json, run.log and the files its
    options name there), its log (stdout and stderr), its stdout and its stderr (a forked
    run's: both are the log)."""

    result: object  # common.result.Result (InterleavedResult for the interleaved mode)
    folder: Path
    log: str
    stdout: str
    stderr: str


class Corpus:
    """CPU runs of the arms that tests read, each made once in the session: forked from one
    warm interpreter by the fork server the experiment uses (common/forkserver.py, through
    experiment/launch.py's client), so a run pays for its ranks' work, not for importing torch
    and Lightning again (seconds a process). A forked run is bit for bit a fresh one (the
    fork-check plan, tests/test_forkserver.py); what only a fresh process shows (the launcher,
    the phases of a start, imports) stays with the fresh runs of tests/test_end_to_end.py."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs: dict[tuple[str, tuple[str, ...]], CorpusRun | str] = {}
        self.server = None

    def _server(self):
        from experiment import launch

        if self.server is None:
            modules = ["native"]
            if lightning_installed():
                modules += ["lightning_impl", "lightning_impl.fabric", "lightning_impl.interleaved"]
            server = launch.ForkServer(
                sys.executable, clean_env(), modules, self.folder / "server.log"
            )
            server.ready()
            self.server = server
        return self.server

    def run(
        self,
        module: str,
        options: list[str],
        fresh: bool = False,
        env: dict[str, str] | None = None,
        launcher: list[str] | None = None,
    ) -> CorpusRun:
        """The run of `module` with `options` ("{folder}" in one stands for the run's folder;
        --output is the corpus's) and clean_env(**env), made the first time it is asked for;
        it must succeed. Forked, or with `fresh` started as `python -m module` (run_module,
        under `launcher` if given): self-launched."""
        assert fresh or launcher is None, "a forked run has no launcher"
        env = env or {}
        key = (module, tuple(options), fresh, tuple(sorted(env.items())), tuple(launcher or ()))
        if key not in self.runs:
            folder = self.folder / f"run{len(self.runs) + 1}"
            self.runs[key] = self._make(module, options, folder, fresh, env, launcher)
        found = self.runs[key]
        if isinstance(found, str):
            pytest.fail(found, pytrace=False)
        return found

    def _make(
        self,
        module: str,
        options: list[str],
        folder: Path,
        fresh: bool,
        env: dict[str, str],
        launcher: list[str] | None,
    ) -> CorpusRun | str:
        from common.result import load_interleaved, load_result

        folder.mkdir()
        argv = [o.replace("{folder}", str(folder)) for o in options]
        argv += ["--output", str(folder / "result.json")]
        log = folder / "run.log"
        started = time.monotonic()
        if fresh:
            proc = run_module(
                module, argv, CORPUS_RUN_TIMEOUT_S, env=clean_env(**env), launcher=launcher
            )
            status, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
            text = stdout + stderr
            log.write_text(text)
        else:
            run = self._server().start(module, argv, clean_env(**env), log)
            status = run.wait(CORPUS_RUN_TIMEOUT_S)
            text = stdout = stderr = log.read_text()
        if status != 0 or "Traceback" in text:  # every test that reads it fails with this
            return f"corpus run {module} {' '.join(argv)}: exit status {status}\n{text[-3000:]}"
        with (self.folder / "runs.txt").open("a") as runs:  # what the session made, and how long
            how = "fresh" if fresh else "forked"
            runs.write(f"{time.monotonic() - started:6.1f} s  {how}  {module} {' '.join(argv)}\n")
        load = load_interleaved if module == "lightning_impl.interleaved" else load_result
        return CorpusRun(load(folder / "result.json"), folder, text, stdout, stderr)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """The session's corpus of CPU runs (see Corpus)."""
    made = Corpus(tmp_path_factory.mktemp("corpus"))
    try:
        yield made
    finally:
        made.close()
