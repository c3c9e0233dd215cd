"""Hostile inputs: values, resources, paths and launch variables refused before launch."""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import json
import math
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, TINY, clean_env, exhaustive, needs_lightning, refusal, run_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_launcher import TORCHRUN as TORCHRUN_RANK  # a torchrun worker's variables

import architectures
from common import config, launcher
from common.models import classification_models
from common.output import OutputError
from common.result import load_result, write_result
from common.workloads import image
from compare.cli import main as compare_main

REAL = ROOT / "results" / "h200" / "precisions" / "native-bf16-r1.json"
LIGHTNING = ROOT / "results" / "h200" / "precisions" / "lightning-bf16-r1.json"
RUNNERS = [
    "native",
    pytest.param("lightning_impl", marks=needs_lightning),
    pytest.param("lightning_impl.fabric", marks=needs_lightning),
]
FAST = settings(
    derandomize=True,
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def refused(argv: list[str]) -> str:
    """The one stderr line of a refused command line."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        config.parse(argv, "test")
    assert exc.value.code == 2
    assert err.getvalue().count("\n") == 1, err.getvalue()
    return err.getvalue()


# --- result paths -------------------------------------------------------------------------


def test_device_nodes_are_refused_and_left_alone():
    before = os.stat("/dev/full")
    assert "is a character device, not a regular file" in refused(
        ["--output", "/dev/full", "--overwrite-output"]
    )
    with pytest.raises(OutputError, match="is a character device"):
        write_result(load_result(REAL), Path("/dev/null"), overwrite=True)
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_fifo_and_socket_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "is a FIFO (named pipe), not a regular file" in refused(
        ["--output", str(fifo), "--overwrite-output"]
    )
    import socket

    with tempfile.TemporaryDirectory(dir="/tmp") as short:
        sock_path = Path(short) / "s"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(sock_path))
            assert "is a socket" in refused(["--output", str(sock_path), "--overwrite-output"])


@pytest.mark.parametrize("target", ["existing", "dangling"])
def test_symlinks_are_refused_never_followed_or_replaced(tmp_path, target):
    real = tmp_path / "real.json"
    if target == "existing":
        real.write_text("precious")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert "is a symbolic link" in refused(["--output", str(link), "--overwrite-output"])
    with pytest.raises(OutputError, match="is a symbolic link"):
        write_result(load_result(REAL), link, overwrite=True)
    assert link.is_symlink() and (
        real.read_text() == "precious" if target == "existing" else not real.exists()
    )


def test_a_path_that_changes_during_the_run_is_checked_again(tmp_path):
    out = tmp_path / "r.json"
    config.parse(["--output", str(out)], "test")  # fine at start
    os.mkfifo(out)  # ... and a FIFO by the time the result is written
    with pytest.raises(OutputError, match="is a FIFO"):
        write_result(load_result(REAL), out, overwrite=True)
    assert stat.S_ISFIFO(os.lstat(out).st_mode) and [p.name for p in tmp_path.iterdir()] == [
        "r.json"
    ]


# --- disk full ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code,words",
    [
        (errno.ENOSPC, "no space left on the device (ENOSPC)"),
        (errno.EDQUOT, "the disk quota is exceeded (EDQUOT)"),
        (errno.EROFS, "the file system is read-only (EROFS)"),
    ],
)
def test_disk_full_names_the_path_keeps_the_summary_and_leaves_nothing(
    tmp_path, monkeypatch, capsys, code, words
):
    from common.report import publish, rank_failed

    out = tmp_path / "r.json"
    cfg = config.parse(["--accelerator", "cpu", "--output", str(out)], "native")

    def full(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError) as exc:
        publish(load_result(REAL), cfg, "Native PyTorch DDP benchmark")
    assert f"cannot write --output {out}: {words}" in str(exc.value)
    assert "the summary above is this run's only record" in str(exc.value)
    assert rank_failed("native", 0, exc.value) == 1
    captured = capsys.readouterr()
    assert "Native PyTorch DDP benchmark" in captured.out and "throughput" in captured.out
    assert captured.err.count("\n") == 1 and str(out) in captured.err
    assert list(tmp_path.iterdir()) == []  # no result, no temp file


def test_compare_report_on_a_full_disk_is_one_line_and_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full"))
    )
    out = tmp_path / "report.md"
    assert compare_main([str(REAL), str(LIGHTNING), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--output {out}: no space left" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--output", "--plot"])
def test_compare_outputs_follow_the_same_path_policy(tmp_path, capsys, option):
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    link = tmp_path / "link.png"
    link.symlink_to(tmp_path / "elsewhere.png")
    for path, words in (
        (fifo, "is a FIFO"),
        (link, "is a symbolic link"),
        (Path("/dev/null"), "character device" if option == "--output" else "must end in"),
    ):
        code = compare_main([str(REAL), str(LIGHTNING), option, str(path), "--overwrite-output"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and words in err, err
    assert (
        stat.S_ISFIFO(os.lstat(fifo).st_mode)
        and link.is_symlink()
        and not (tmp_path / "elsewhere.png").exists()
    )


# --- property-based: the shared parser ---------------------------------------------------


def _value_for(action) -> st.SearchStrategy[str]:
    junk = st.text(max_size=8)
    if action.choices:
        return st.sampled_from(list(action.choices)) | junk
    if action.type is int:
        return st.integers(-3, 2**70).map(str) | st.sampled_from(["0", "1", "2", "1e3", "٣"]) | junk
    if action.type is float:
        return (
            st.floats(allow_nan=True, allow_infinity=True).map(repr)
            | st.sampled_from(["nan", "inf", "-inf", "1e999", "0", "1e-300", "0x10"])
            | junk
        )
    return (
        st.sampled_from(["/dev/null", "/dev/full", "/tmp", "/nonexistent/r.json", "r\nx.json", ""])
        | junk
    )


PARSER = config.build_parser("test")
# --verbose asks for a traceback with every error (that is its job), so it is left out here.
OPTIONS = [
    a
    for a in PARSER._actions
    if a.option_strings and not {"--help", "--verbose"} & set(a.option_strings)
]


@st.composite
def argvs(draw) -> list[str]:
    argv: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 9)) == 0:
            argv.append(draw(st.text(max_size=6).filter(lambda t: t not in ("-h", "--help"))))
            continue
        action = draw(st.sampled_from(OPTIONS))
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            argv.append(draw(_value_for(action)))
    return argv


@FAST
@given(argvs())
def test_any_argv_parses_to_a_valid_config_or_exits_2_with_one_line(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            cfg = config.parse(argv, "test")
        except SystemExit as exc:
            assert exc.code == 2, (argv, err.getvalue())
            assert err.getvalue().count("\n") == 1 and err.getvalue().endswith("\n"), (
                argv,
                err.getvalue(),
            )
            assert "Traceback" not in err.getvalue()
            return
    config.validate(cfg)
    floats = (cfg.lr, cfg.momentum, cfg.weight_decay, cfg.bucket_cap_mb, cfg.timeout)
    assert all(math.isfinite(x) for x in floats) and cfg.devices >= 1 and cfg.steps >= 1


# --- property-based: compare's loader ---------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
BASE = json.loads(REAL.read_text())


@st.composite
def mutated(draw) -> object:
    """A valid result with one to three values replaced or deleted at random depths."""
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        node = doc
        while isinstance(node, (dict, list)) and node:
            key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
            child = node[key]
            if isinstance(child, (dict, list)) and child and draw(st.booleans()):
                node = child
                continue
            if draw(st.booleans()):
                del node[key]
            else:
                node[key] = draw(JSON)
            break
    return doc


@FAST
@given(st.one_of(mutated(), JSON, st.dictionaries(st.sampled_from(sorted(BASE)), JSON)))
def test_any_json_loads_or_gives_one_line_never_a_traceback(doc):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.json"
        path.write_text(json.dumps(doc))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = compare_main([str(path), str(LIGHTNING), "--allow-mismatch"])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), err.getvalue()


# --- end to end: refused before any rank starts, nothing written -------------------------

SLURM_ONE_TASK = {
    "SLURM_NTASKS": "1",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_NNODES": "1",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_ID": "4321",
    "SLURM_JOB_NAME": "bench",
    "SLURM_NODELIST": "localhost",
}


@pytest.mark.parametrize("module", RUNNERS)
@pytest.mark.parametrize("case", ["nan", "cpus", "rank", "vit", "omp", "nodeid", "addr", "port"])
def test_refused_before_any_rank_starts(module, case, tmp_path):
    """Every arm refuses the same inputs, with the same line, before any process starts (its
    main() in this process: tests/conftest.py's refusal); a refusal as its own process is the
    test after this one."""
    out = tmp_path / "r.json"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        args, env, message = {
            "nan": ([*TINY, "--lr", "nan"], {}, "--lr must be a finite number, got nan"),
            "cpus": (
                [*TINY, "--devices", str(launcher.available_cpus() + 1)],
                {},
                "--oversubscribe-cpus",
            ),
            "rank": (
                [*TINY, "--devices", "2"],
                {**TORCHRUN_RANK, "RANK": "2", "LOCAL_RANK": "0"},
                "RANK=2 is outside 0..1",
            ),
            "vit": ([*TINY, "--arch", "vit_b_16"], {}, "--arch vit_b_16 takes 224x224 images only"),
            "omp": (TINY, {"OMP_NUM_THREADS": "²"}, "OMP_NUM_THREADS='²' must be a whole number"),
            "nodeid": (
                TINY,
                {k: v for k, v in SLURM_ONE_TASK.items() if k != "SLURM_NODEID"},
                "SLURM_NODEID is not set but SLURM_NTASKS is",
            ),
            "addr": (
                [*TINY, "--devices", "2"],
                {**TORCHRUN_RANK, "MASTER_ADDR": "no-such-host.invalid"},
                "MASTER_ADDR='no-such-host.invalid' cannot be resolved",
            ),
            "port": (
                TINY,
                {**SLURM_ONE_TASK, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port},
                f"MASTER_PORT={port} is already in use on this host",
            ),
        }[case]
        line = refusal(module, [*args, "--output", str(out)], **env)
    assert line.startswith(f"{module}: error: ") and message in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("module", RUNNERS)
def test_a_runner_refuses_as_its_own_process_in_one_line_and_starts_nothing(module, tmp_path):
    """`python -m MODULE` with a launcher variable that no rank could take: exit 2, one line
    on stderr, nothing on stdout, nothing written; native decides without importing torch."""
    out = tmp_path / "r.json"
    native = module == "native"  # the Lightning runners import their runner, torch, Lightning
    proc = run_module(
        module,
        [*TINY, "--devices", "2", "--output", str(out)],
        timeout=120,
        env=clean_env(**{**TORCHRUN_RANK, "RANK": "2", "LOCAL_RANK": "0"}),
        launcher=[sys.executable, "-X", "importtime"] if native else None,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    imports, line = re.findall(r"^import time:.*\|\s*([\w.]+)$", proc.stderr, re.M), proc.stderr
    if native:
        line = "".join(x for x in proc.stderr.splitlines(True) if not x.startswith("import time:"))
        assert imports and not {"torch", "numpy"} & set(imports), imports
    assert line.count("\n") == 1 and "Traceback" not in line, proc.stderr[-3000:]
    assert line.startswith(f"{module}: error: RANK=2 is outside 0..1 (WORLD_SIZE=2)"), line
    assert proc.stdout == "", "no rank may have started"
    assert list(tmp_path.iterdir()) == []


# --- slurm/sweep.sh: every mistake one line, exit 2, nothing made -----

SWEEP = ROOT / "slurm" / "sweep.sh"


@pytest.fixture(scope="module")
def no_sbatch_path(tmp_path_factory) -> str:
    """A PATH with the tools sweep.sh uses before it submits, and no sbatch: never submits."""
    folder = tmp_path_factory.mktemp("bin")
    for tool in ("ls", "dirname", "date", "sed", "mkdir"):
        (folder / tool).symlink_to(shutil.which(tool))
    return str(folder)


def sweep(args: list[str], path: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("bash"), str(SWEEP), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": path, "HOME": str(cwd)},
        check=False,
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["--gpus"], "--gpus needs a value (see --help)"),
        (["--gpus", "1", "--mode"], "--mode needs a value"),
        (["--gpus", "1", "--mode", "weak", "--outdir"], "--outdir needs a value"),
        (["--gpus", "1", "--mode", "weak", "--sbatch"], "--sbatch needs a value"),
        (["--gpus", "9" * 20, "--mode", "weak"], f"--gpus {'9' * 20}: use at most 1024"),
        (["--shapes", f"{'9' * 19}x2", "--mode", "weak"], f"nodes {'9' * 19}: use at most 10000"),
        (["--gpus", "1,2", "--mode", "strong", "--batch", "9" * 20], "--batch 9999"),
        (
            ["--gpus", "1", "--mode", "weak", "--repeats", "08x"],
            "--repeats 08x: use a whole number",
        ),
        (["--gpus", "1", "--mode", "weak", "--outdir="], "--outdir needs a folder"),
        (["--gpus", "1", "--mode", "weak", "--outdir", "FILE"], "--outdir FILE is not a folder"),
        (
            ["--gpus", "1", "--mode", "weak", "--outdir", "FILE/sub"],
            "FILE/sub: FILE is not a folder",
        ),
    ],
)
def test_sweep_mistakes_are_one_line_and_exit_2(args, message, tmp_path, no_sbatch_path):
    (tmp_path / "FILE").write_text("keep")
    proc = sweep(args, no_sbatch_path, tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("sweep.sh: error: ")
    assert message in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]
    assert (tmp_path / "FILE").read_text() == "keep"


SWEEP_OPTIONS = [
    "--gpus",
    "--mode",
    "--batch",
    "--shapes",
    "--nodes",
    "--repeats",
    "--warmup-runs",
    "--sbatch",
    "--outdir",
    "--cpu",
    "--wait",
    "--",
    "--bogus",
]
SWEEP_VALUES = (
    st.sampled_from(
        [
            "1",
            "2",
            "1,2",
            "0",
            "-1",
            "08",
            "1x2",
            "2x2,1x1",
            "weak",
            "strong",
            "9" * 20,
            "",
            "x",
            "FILE",
            "FILE/sub",
            "new",
        ]
    )
    | st.integers(0, 2**70).map(str)
    | st.text(max_size=6)
)


@settings(derandomize=True, max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(SWEEP_OPTIONS) | SWEEP_VALUES, max_size=8))
def test_any_sweep_command_line_exits_2_with_one_line_before_submitting(no_sbatch_path, argv):
    """Without sbatch every command line ends before a submission: one line, nothing made."""
    if {"-h", "--help"} & set(argv):
        return
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "FILE").write_text("keep")
        proc = sweep(argv, no_sbatch_path, cwd)
        assert proc.returncode == 2 and proc.stdout == "", (argv, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("sweep.sh: error: "), argv
        assert sorted(p.name for p in cwd.iterdir()) == ["FILE"], argv


# --- provenance: the digest names the tree it digested ----------------


def test_source_digest_names_the_tree_and_digests_the_one_given(tmp_path):
    import sys

    from common.source import SOURCE_PACKAGES, source_digest

    copy = tmp_path / "other checkout"
    for package in SOURCE_PACKAGES:
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (copy / "native" / "extra.py").write_text("# an edit in the other checkout\n")

    def digest(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "common", "source-digest", *args],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    installed, other = digest(), digest(str(copy))
    assert installed.stdout == f"{source_digest(ROOT)}  {ROOT}\n"  # run elsewhere: says which tree
    assert other.stdout == f"{source_digest(copy)}  {copy}\n"
    assert source_digest(copy) != source_digest(ROOT)
    refused = digest(str(tmp_path))
    assert refused.returncode == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1
    assert f"{tmp_path} is not a checkout of this suite" in refused.stderr


# --- what a rank would find, found by the parser -----------------------


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--arch", "vit_b_16", "--image-size", "64"], "--arch vit_b_16 takes 224x224 images only"),
        (
            ["--arch", "maxvit_t", "--image-size", "256"],
            "--arch maxvit_t takes 224x224 images only",
        ),
        (["--image-size", "2147483647"], "--image-size 2147483647 is too large; use at most 4096"),
        (["--image-size", "4097"], "--image-size 4097 is too large; use at most 4096"),
        (["--arch", "googlenet"], "--arch googlenet returns auxiliary classifier outputs while"),
        (
            ["--arch", "inception_v3", "--image-size", "299"],
            "--arch inception_v3 returns auxiliary",
        ),
        (["--arch", "alexnet", "--image-size", "62"], "--image-size 62 is too small for alexnet"),
        (
            ["--image-size", "32", "--batch-size-per-device", "1"],
            "--image-size 32 with one image per device is too small for resnet50",
        ),
        (
            ["--image-size", "48", "--global-batch-size", "2", "--devices", "2"],
            "with one image per",
        ),
    ],
)
def test_an_architecture_that_cannot_take_the_images_is_refused_by_the_parser(argv, message):
    assert message in refused(argv)


ONE_IMAGE = "with one image per device is too small"


def _parsed(argv: list[str]) -> str | None:
    """None when the parser accepts `argv`, else its one line."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            config.parse(argv, "test")
        except SystemExit:
            return err.getvalue()
    return None


@pytest.mark.exhaustive
@pytest.mark.parametrize("arch", sorted(classification_models()))
def test_the_parser_accepts_what_each_architecture_trains_on_and_refuses_the_rest(arch):
    """The parser's rules against what each model's training forward pass takes on the meta
    device (tests/architectures.py): everything accepted trains; what is refused fails, except
    where a rule is conservative. What the forward passes take is the committed table of the
    installed torchvision, derived here where it has none; under --exhaustive derived anew (the
    model built once, every probe run) and checked against the table."""
    table = architectures.committed()
    if table is None or exhaustive():
        row = architectures.derive_one(arch)
        if table is not None:
            assert row == table.get(arch, "missing"), f"{architectures.table_path()} is stale"
    else:
        assert arch in table, f"{arch} has no row in {architectures.table_path()}: record it"
        row = table[arch]
    if row is None:
        pytest.skip(f"{arch} cannot be built on the meta device")
    for batch in architectures.BATCHES:
        for size in architectures.SIZES:
            argv = [
                "--arch",
                arch,
                "--image-size",
                str(size),
                "--batch-size-per-device",
                str(batch),
            ]
            refusal = _parsed(argv)
            if refusal is None:
                assert size in row[batch], argv  # never a size that fails inside the ranks
            elif size in row[batch]:  # refused though it trains: where a rule is conservative
                conservative = (
                    size < image.MIN_IMAGE_SIZE
                    or (batch == 1 and ONE_IMAGE in refusal)
                    or (arch == "maxvit_t" and size == 223)
                )  # stem rounds to 112
                assert conservative, (argv, refusal)


def test_the_architecture_table_has_a_row_for_every_model_and_no_other():
    """The committed table of the installed torchvision names its models (where it has none, the
    test above derives each row)."""
    table = architectures.committed()
    if table is None:
        pytest.skip(f"no {architectures.table_path()}: each row is derived instead")
    assert sorted(table) == sorted(classification_models())


@pytest.mark.parametrize(
    "variable,value,message",
    [
        ("SLURM_CPUS_PER_TASK", "abc", "SLURM_CPUS_PER_TASK='abc' is not a whole number"),
        ("SLURM_CPUS_PER_TASK", "0", "SLURM_CPUS_PER_TASK=0 must be 1 or more"),
        ("SLURM_NNODES", "x", "SLURM_NNODES='x' is not a whole number"),
        ("SLURM_NTASKS_PER_NODE", "٣", "tasks are spread unevenly over the nodes (٣)"),
    ],
)
def test_experiment_under_srun_names_a_bad_slurm_variable_before_any_run(
    variable, value, message, tmp_path
):
    """python -m experiment --launch srun reads these for every run: checked before the first."""
    import sys

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "srun").write_text("#!/bin/sh\nexit 99\n")
    (bin_ / "srun").chmod(0o755)
    slurm = {
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_NNODES": "1",
        variable: value,
    }
    env = clean_env(PATH=f"{bin_}:{os.environ['PATH']}", **slurm)
    out = tmp_path / "exp"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiment",
            "--launch",
            "srun",
            "--repeats",
            "1",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and not out.exists()
