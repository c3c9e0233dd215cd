"""compare over many mutated result files: a clean one-line error or a report, never a crash."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from compare.cli import main

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "results" / "h200" / "precisions" / "native-bf16-r1.json"
LIGHTNING = ROOT / "results" / "h200" / "precisions" / "lightning-bf16-r1.json"
BAD_VALUES = [None, "x", -1, 0, 1e308, [], {}, True]


def mutations() -> list[tuple[str, dict]]:
    """(description, mutated document) for every top-level and per-rank field."""
    base = json.loads(NATIVE.read_text())
    out = []
    for key in base:
        gone = copy.deepcopy(base)
        del gone[key]
        out.append((f"without {key}", gone))
        for value in BAD_VALUES:
            changed = copy.deepcopy(base)
            changed[key] = value
            out.append((f"{key}={value!r}", changed))
    for key in base["ranks"][0]:
        for value in BAD_VALUES:
            changed = copy.deepcopy(base)
            changed["ranks"][0][key] = value
            out.append((f"ranks.0.{key}={value!r}", changed))
    for steps in ([1e308] * 50, [0.0] * 50, [-1.0] * 50, [1.0] * 49):
        changed = copy.deepcopy(base)
        changed["ranks"][0]["step_times_ms"] = steps
        out.append((f"step times {steps[:1]}x{len(steps)}", changed))
    return out


MUTATIONS = mutations()


@pytest.mark.parametrize("case", range(len(MUTATIONS)), ids=[m[0] for m in MUTATIONS])
def test_mutated_result_gives_a_report_or_one_clean_error(case, tmp_path, capsys):
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(MUTATIONS[case][1]))
    code = main([str(path), str(LIGHTNING)])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:  # a bad file is named; a valid file of another workload is a mismatch
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert str(path) in err or "different workloads" in err, err


@pytest.mark.parametrize("cut", [0, 1, 100, 1000, 5000])
def test_truncated_result_names_the_file(cut, tmp_path, capsys):
    path = tmp_path / "cut.json"
    path.write_text(NATIVE.read_text()[:cut])
    assert main([str(path), str(LIGHTNING)]) == 2
    assert str(path) in capsys.readouterr().err


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literals_are_refused(literal, tmp_path, capsys):
    text = NATIVE.read_text().replace(
        '"final_loss_mean": ', f'"final_loss_mean": {literal}, "_was": ', 1
    )
    path = tmp_path / "nan.json"
    path.write_text(text)
    assert main([str(path), str(LIGHTNING)]) == 2
    assert str(path) in capsys.readouterr().err
