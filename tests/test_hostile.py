"""Hostile inputs (issue 16): values, resources, paths and launch variables refused before launch."""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import json
import math
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import config, launcher
from common.output import OutputError
from common.result import load_result, write_result
from compare.cli import main as compare_main

from conftest import ROOT, TINY, clean_env, needs_lightning, run_module

REAL = ROOT / "results" / "h200" / "precisions" / "native-bf16-r1.json"
LIGHTNING = ROOT / "results" / "h200" / "precisions" / "lightning-bf16-r1.json"
RUNNERS = ["native", pytest.param("lightning_impl", marks=needs_lightning)]
FAST = settings(derandomize=True, max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


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
        ["--output", "/dev/full", "--overwrite-output"])
    with pytest.raises(OutputError, match="is a character device"):
        write_result(load_result(REAL), Path("/dev/null"), overwrite=True)
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_fifo_and_socket_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "is a FIFO (named pipe), not a regular file" in refused(["--output", str(fifo), "--overwrite-output"])
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
    assert link.is_symlink() and (real.read_text() == "precious" if target == "existing" else not real.exists())


def test_a_path_that_changes_during_the_run_is_checked_again(tmp_path):
    out = tmp_path / "r.json"
    config.parse(["--output", str(out)], "test")  # fine at start
    os.mkfifo(out)  # ... and a FIFO by the time the result is written
    with pytest.raises(OutputError, match="is a FIFO"):
        write_result(load_result(REAL), out, overwrite=True)
    assert stat.S_ISFIFO(os.lstat(out).st_mode) and [p.name for p in tmp_path.iterdir()] == ["r.json"]


# --- disk full ------------------------------------------------------------------------------

@pytest.mark.parametrize("code,words", [(errno.ENOSPC, "no space left on the device (ENOSPC)"),
                                        (errno.EDQUOT, "the disk quota is exceeded (EDQUOT)"),
                                        (errno.EROFS, "the file system is read-only (EROFS)")])
def test_disk_full_names_the_path_keeps_the_summary_and_leaves_nothing(tmp_path, monkeypatch, capsys,
                                                                       code, words):
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
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
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
    for path, words in ((fifo, "is a FIFO"), (link, "is a symbolic link"), (Path("/dev/null"),
                                                                              "character device" if option == "--output"
                                                                              else "must end in")):
        code = compare_main([str(REAL), str(LIGHTNING), option, str(path), "--overwrite-output"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and words in err, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and not (tmp_path / "elsewhere.png").exists()


# --- property-based: the shared parser ---------------------------------------------------

def _value_for(action) -> st.SearchStrategy[str]:
    junk = st.text(max_size=8)
    if action.choices:
        return st.sampled_from(list(action.choices)) | junk
    if action.type is int:
        return st.integers(-3, 2**70).map(str) | st.sampled_from(["0", "1", "2", "1e3", "٣"]) | junk
    if action.type is float:
        return (st.floats(allow_nan=True, allow_infinity=True).map(repr)
                | st.sampled_from(["nan", "inf", "-inf", "1e999", "0", "1e-300", "0x10"]) | junk)
    return st.sampled_from(["/dev/null", "/dev/full", "/tmp", "/nonexistent/r.json", "r\nx.json", ""]) | junk


PARSER = config.build_parser("test")
# --verbose asks for a traceback with every error (that is its job), so it is left out here.
OPTIONS = [a for a in PARSER._actions
           if a.option_strings and not {"--help", "--verbose"} & set(a.option_strings)]


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
            assert err.getvalue().count("\n") == 1 and err.getvalue().endswith("\n"), (argv, err.getvalue())
            assert "Traceback" not in err.getvalue()
            return
    config.validate(cfg)
    floats = (cfg.lr, cfg.momentum, cfg.weight_decay, cfg.bucket_cap_mb, cfg.timeout)
    assert all(math.isfinite(x) for x in floats) and cfg.devices >= 1 and cfg.steps >= 1


# --- property-based: compare's loader ---------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4),
                    max_leaves=12)
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

@pytest.mark.slow
@pytest.mark.parametrize("module", RUNNERS)
@pytest.mark.parametrize("case", ["nan", "cpus", "rank"])
def test_refused_before_any_rank_starts(module, case, tmp_path):
    out = tmp_path / "r.json"
    args, env, message = {
        "nan": ([*TINY, "--lr", "nan"], {}, "--lr must be a finite number, got nan"),
        "cpus": ([*TINY, "--devices", str(launcher.available_cpus() + 1)], {}, "--oversubscribe-cpus"),
        "rank": ([*TINY, "--devices", "2"], {"TORCHELASTIC_RUN_ID": "x", "RANK": "2", "LOCAL_RANK": "0",
                                             "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                                             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
                 "RANK=2 is outside 0..1"),
    }[case]
    proc = run_module(module, [*args, "--output", str(out)], timeout=120, env=clean_env(**env))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"{module}: error: ") and message in proc.stderr
    assert proc.stdout == "", "no rank may have started"
    assert list(tmp_path.iterdir()) == []
