"""experiment.together: checks side by side, results in order, nothing left running."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from experiment import together
from experiment.together import CannotStart, run_together

PY = sys.executable
ENV = dict(os.environ)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose (its parent, init or pytest, reaps it)
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def _wait_gone(pid: int) -> bool:
    for _ in range(100):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_results_come_back_in_the_order_given_with_output_and_exit_status():
    cmds = [
        ([PY, "-c", "import sys; print('one'); sys.exit(3)"], ENV),
        ([PY, "-c", "import sys; print('two', file=sys.stderr)"], ENV),
        ([PY, "-c", "print('three')"], ENV),
    ]
    done = run_together(cmds, timeout_s=60, width=2)
    assert [d.returncode for d in done] == [3, 0, 0]
    assert [d.output.strip() for d in done] == ["one", "two", "three"]
    quiet = run_together(cmds[1:2], timeout_s=60, merge_stderr=False)
    assert quiet[0].output == ""


def test_commands_of_one_batch_run_at_the_same_time(tmp_path):
    # the first waits for a file only the second writes: one at a time, it would time out
    flag = tmp_path / "flag"
    waiter = f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)"
    cmds = [([PY, "-c", waiter], ENV), ([PY, "-c", f"open({str(flag)!r}, 'w')"], ENV)]
    assert [d.returncode for d in run_together(cmds, timeout_s=60, width=2)] == [0, 0]
    flag.unlink()
    assert [d.returncode for d in run_together(cmds, timeout_s=1, width=1)] == [None, 0]


def test_a_timeout_kills_the_commands_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    parent = (
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(600)"
    )
    (done,) = run_together([([PY, "-c", parent], ENV)], timeout_s=3)
    assert done.returncode is None
    assert _wait_gone(int(pidfile.read_text()))


def test_an_interrupted_wait_kills_every_command_started(tmp_path, monkeypatch):
    pidfiles = [tmp_path / f"{i}.pid" for i in range(2)]
    cmds = [
        (
            [
                PY,
                "-c",
                f"import os, time; open({str(p)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)",
            ],
            ENV,
        )
        for p in pidfiles
    ]
    real = together.time.monotonic

    def interrupted() -> float:  # Ctrl-C arrives once both commands have started
        while not all(p.exists() and p.read_text() for p in pidfiles):
            time.sleep(0.02)
        raise KeyboardInterrupt

    monkeypatch.setattr(together.time, "monotonic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_together(cmds, timeout_s=60, width=2)
    monkeypatch.setattr(together.time, "monotonic", real)
    assert all(_wait_gone(int(p.read_text())) for p in pidfiles)


def test_a_command_that_cannot_start_names_its_index_and_stops_the_others(tmp_path, monkeypatch):
    started = []
    real = together.subprocess.Popen

    def recording(*args, **kwargs):
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(together.subprocess, "Popen", recording)
    cmds = [([PY, "-c", "import time; time.sleep(600)"], ENV)]
    cmds.append(([str(tmp_path / "no-such-python"), "-V"], ENV))
    with pytest.raises(CannotStart) as caught:
        run_together(cmds, timeout_s=60, width=2)
    assert caught.value.index == 1
    assert isinstance(caught.value.error, FileNotFoundError)
    assert len(started) == 1 and started[0].returncode == -9  # killed and reaped
