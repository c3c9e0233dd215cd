"""benchmarks.trace_gaps: GPU idle time split into host-late and queued gaps, on a made-up trace."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from benchmarks import trace_gaps


def x(cat, name, ts, dur, tid=1, corr=None):
    event = {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": ts,
        "dur": dur,
        "pid": 1,
        "tid": tid,
        "args": {},
    }
    if corr is not None:
        event["args"]["correlation"] = corr
    return event


def kernel(name, ts, dur, corr):
    return {**x("kernel", name, ts, dur, tid=7, corr=corr), "pid": 0}


def trace_events(extra_kernel=False):
    """Two steps. GPU: k1 [10,30], k2 [52,70], k3 [75,90], k4 [102,110] (+ k5 [110,111])."""
    events = [
        x("user_annotation", "ProfilerStep#60", 0, 100),
        x("user_annotation", "ProfilerStep#61", 100, 12),
        x("cpu_op", "aten::a", 0, 10),
        x("cuda_runtime", "cudaLaunchKernel", 5, 1, corr=1),
        kernel("k1", 10, 20, 1),
        # k2 is launched at 50, 20 us after the GPU ran dry at 30: host late, inside Outer > aten::b
        x("cpu_op", "Outer", 20, 40),
        x("cpu_op", "aten::early", 22, 5),
        x("cpu_op", "aten::b", 45, 10),
        x("cuda_runtime", "cudaLaunchKernel", 50, 1, corr=2),
        kernel("k2", 52, 18, 2),
        # k3 was launched at 55, before the GPU went idle at 70: a queued gap of 5 us
        x("cuda_runtime", "cudaLaunchKernel", 55, 1, corr=3),
        kernel("k3", 75, 15, 3),
        x("cuda_runtime", "cudaStreamSynchronize", 60, 10, corr=5),
        # k4 is launched at 100 from plain Python (no op open): 10 us host late, 2 us queued
        x("cuda_runtime", "cudaLaunchKernel", 100, 1, corr=4),
        kernel("k4", 102, 8, 4),
    ]
    if extra_kernel:
        events += [x("cuda_runtime", "cudaLaunchKernel", 101, 1, corr=6), kernel("k5", 110, 1, 6)]
    return {"traceEvents": events + [{"ph": "M", "name": "process_name", "pid": 0}]}


def write(path, data):
    path.write_text(json.dumps(data))
    return path


def test_idle_is_split_into_host_late_and_queued(tmp_path):
    s = trace_gaps.summarise(write(tmp_path / "n.trace.json", trace_events()))
    assert s.steps == 2
    assert s.window_us == pytest.approx(100) and s.busy_us == pytest.approx(61)
    assert s.host_late == {"Outer": pytest.approx(20), "(python)": pytest.approx(10)}
    assert s.host_late_ops == {"Outer > aten::b": pytest.approx(20), "(python)": pytest.approx(10)}
    assert s.queued_us == pytest.approx(2 + 5 + 2)
    assert s.busy_us + sum(s.host_late.values()) + s.queued_us == pytest.approx(s.window_us)
    assert (
        s.runtime["cudaLaunchKernel"] == (4, pytest.approx(4))
        and s.runtime["cudaStreamSynchronize"][0] == 1
    )
    assert s.largest[0] == (pytest.approx(22), "k1", "k2", "Outer > aten::b")


def test_overlapping_kernels_are_busy_once(tmp_path):
    data = trace_events()
    data["traceEvents"].append(kernel("side", 12, 10, 99))  # another stream, inside k1
    s = trace_gaps.summarise(write(tmp_path / "t.json", data))
    assert s.busy_us == pytest.approx(61)


def test_two_traces_report_the_kernels_that_differ(tmp_path):
    a = write(tmp_path / "native.trace.json", trace_events())
    b = tmp_path / "lightning.trace.json.gz"
    with gzip.open(b, "wt") as f:
        json.dump(trace_events(extra_kernel=True), f)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.trace_gaps", str(a), str(b)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| native | lightning |" in proc.stdout
    assert "| k5 | +0.5 |" in proc.stdout  # one extra kernel over two steps
    assert "| GPU busy | 0.03 | 0.03 |" in proc.stdout


def test_a_file_that_is_not_a_trace_is_refused_in_one_line(tmp_path):
    bad = write(tmp_path / "r.json", {"implementation": "native"})
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.trace_gaps", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "is it a --trace file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_work_is_split_by_stream_and_the_busiest_streams_gaps_are_sized(tmp_path):
    data = trace_events()
    data["traceEvents"].append(
        {**kernel("side", 12, 10, 99), "tid": 20}
    )  # a side stream, inside k1
    s = trace_gaps.summarise(write(tmp_path / "t.json", data))
    assert s.main_stream == 7 and s.stream_us == {7: pytest.approx(61), 20: pytest.approx(10)}
    # stream 7: k1 [10,30] k2 [52,70] k3 [75,90] k4 [102,110]: gaps of 22, 5 and 12 us
    assert s.main_gaps == {
        "under 2 us": (0, 0.0),
        "2-20 us": (2, pytest.approx(17)),
        "20 us or more": (1, pytest.approx(22)),
    }
    text = trace_gaps.report([tmp_path / "t.json"], [s], top=5)
    assert "| GPU work summed over streams | 0.04 |" in text and "| 2-20 us | 0.009 (1) |" in text
