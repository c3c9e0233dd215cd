"""The same numbers: every committed report's overhead % is the one recorded before the redesign.

tests/data/report_numbers.json was recorded by `tests/report_numbers.py --record` from the code
before the report was redesigned (issue 31); a change to how reports are laid out must leave every
comparison, and every number, where it was.
"""

from __future__ import annotations

import json

import pytest

from tests.report_numbers import FIXTURE, groups, numbers

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
