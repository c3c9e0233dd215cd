"""The responsibilities plan in one command on CPU (responsibilities-cpu, 2 gloo ranks, every
arm; shortened here to 2 blocks of 3 timed steps): its folder's report says where the cost
comes from, every responsibility measured (the launch and SIGTERM ablations too, as one GPU
cannot), and no ablation run is taken for a diagnosis."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env, needs_lightning

from common.arms import ARMS
from common.result import load_result
from experiment import plans

pytestmark = [pytest.mark.slow, needs_lightning]


def test_the_cpu_plan_decomposes_lightnings_cost_into_every_responsibility(tmp_path):
    out = tmp_path / "exp"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "experiment", "--plan", "responsibilities-cpu"),
            *("--variant", "gpt", "--repeats", "2", "--warmup-runs", "0", "--out", str(out)),
            *("--", "--warmup-steps", "1", "--steps", "3"),
        ],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = out / "gpt"
    manifest = json.loads((folder / "manifest.json").read_text())
    names = [a.label for a in plans.find("responsibilities-cpu").arms]
    assert [a["runner"] for a in manifest["arms"]] == names  # the table's arms, by name
    for name in names:
        for k in (1, 2):
            result = load_result(folder / "results" / f"{name}-r{k}.json")
            assert result.arm == name and result.implementation == ARMS[name].runner
            assert result.environment.diagnostics is None  # a measurement, not a diagnosis
    report = (folder / "report.txt").read_text()
    section = report.split("\nWhere the cost comes from\n", 1)[1].split("\n\n", 1)[0]
    assert "not isolated here" not in section and "not measured here" not in section
    for title in (
        "launch and process group",
        "DDP wrapper and its stream",
        "mixed precision",
        "backward and step wrappers",
        "the Trainer's loop",
        "of which: lightning-no-sigterm",
        "the Trainer's services",
        "total",
        "residual",
    ):
        assert f"  {title}" in section, title
    assert "where the cost comes from, 2 CPU ranks: " in report
    assert "diagnostic" not in report
