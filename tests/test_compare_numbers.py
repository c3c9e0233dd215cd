"""The same numbers: every committed report's overhead % is the one recorded before the redesign.

tests/data/report_numbers.json was recorded by `tests/report_numbers.py --record` from the code
before the report was redesigned (issue 31); a change to how reports are laid out must leave every
comparison, and every number, where it was.
"""

from __future__ import annotations

import json

import pytest

from tests.report_numbers import FIXTURE, ROOT, groups, numbers

RECORDED = json.loads(FIXTURE.read_text())


def test_every_committed_report_is_in_the_fixture():
    """A results folder added later needs its numbers recorded; one removed leaves the fixture."""
    assert sorted(name for name, _, _ in groups()) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_overhead_percent_is_the_recorded_one(name):
    """Each comparison (world size, arm, baseline) is there, in order, with its overhead %."""
    inputs, options = RECORDED[name]["inputs"], RECORDED[name]["options"]
    found = numbers(inputs, options)
    key = [(o["world_size"], o["arm"], o["baseline"]) for o in found]
    assert key == [(o["world_size"], o["arm"], o["baseline"]) for o in RECORDED[name]["overhead"]]
    for now, then in zip(found, RECORDED[name]["overhead"]):
        assert now["percent"] == pytest.approx(then["percent"], rel=1e-12, abs=1e-12), now


@pytest.mark.parametrize("name", sorted(n for n in RECORDED if (ROOT / n / "report.txt").is_file()))
def test_committed_text_reports_answer_first_within_100_columns(name):
    """The title, then every comparison's verdict; in a 2-arm report the verdict within the
    first 25 lines; no line of the text or of the markdown's prose wider than 100 columns."""
    text = (ROOT / name / "report.txt").read_text(encoding="utf-8").splitlines()
    assert max(map(len, text)) <= 100
    config = text.index(next(line for line in text if line.startswith("Configuration")))
    heads = [f"{o['arm']} vs {o['baseline']}, " for o in RECORDED[name]["overhead"]]
    title = text.index("")  # the title (and any diagnostics) fill the lines before a blank one
    if not heads:  # a folder with runs of one arm only (an experiment stopped early): it says so
        assert text[title + 1].strip().startswith("no overhead computed") and title + 1 < config
        return
    starts = [next(i for i, line in enumerate(text) if line.startswith(h)) for h in heads]
    assert starts == sorted(starts) and starts[0] == title + 1 and starts[-1] < config
    if len(heads) == 1:
        assert starts[-1] < 25
    markdown = (ROOT / name / "report.md").read_text(encoding="utf-8").splitlines()
    assert max(len(line) for line in markdown if not line.startswith("|")) <= 100
    first = next(i for i, line in enumerate(markdown) if line.startswith("- "))
    assert markdown[first].startswith(f"- {heads[0]}") and markdown[0].startswith("# ")
    assert first < markdown.index(next(x for x in markdown if x.startswith("## Configuration")))
