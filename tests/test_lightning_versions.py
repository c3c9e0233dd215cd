"""lightning_impl.compat: which Lightning releases run, and what a result records about each."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from lightning_impl import compat


def fake(version: str) -> SimpleNamespace:
    return SimpleNamespace(__version__=version)


@pytest.mark.parametrize("version", ["2.5.5", "2.6.6", "2.6.2+git35e56ef"])
def test_releases_from_2_5_5_run_without_asking(monkeypatch, version):
    monkeypatch.delenv(compat.ALLOW_OLD_ENV, raising=False)
    assert compat.version_problem(fake(version)) is None


def test_an_older_release_is_refused_unless_asked_for_as_a_version_arm(monkeypatch):
    monkeypatch.delenv(compat.ALLOW_OLD_ENV, raising=False)
    problem = compat.version_problem(fake("2.5.1"))
    assert problem.startswith("Lightning 2.5.1 is older than 2.5.5 (its autocast caches casts;")
    assert f"set {compat.ALLOW_OLD_ENV}=1" in problem
    monkeypatch.setenv(compat.ALLOW_OLD_ENV, "1")
    assert compat.version_problem(fake("2.5.1")) is None
    assert compat.version_problem(fake("2.4.0")) is None


def test_a_release_older_than_any_tried_is_refused_even_when_asked_for(monkeypatch):
    monkeypatch.setenv(compat.ALLOW_OLD_ENV, "1")
    assert compat.version_problem(fake("2.2.5")).startswith(
        "Lightning 2.2.5 is older than 2.4.0, the oldest release the runners were run under"
    )


@pytest.mark.parametrize(
    ("version", "trainer", "world", "sync", "cache"),
    [
        ("2.5.1", True, 2, False, True),  # before the SIGTERM broadcast; Trainer caches casts
        ("2.5.1", False, 2, False, False),  # Fabric's arm passes native's cache setting
        ("2.5.5", True, 2, True, False),
        ("2.5.5", True, 1, False, False),
        ("2.6.2+git35e56ef", True, 2, True, False),
    ],
)
def test_the_result_records_each_releases_per_step_behaviour(
    monkeypatch, version, trainer, world, sync, cache
):
    monkeypatch.setitem(sys.modules, "lightning", fake(version))
    facts = compat.lightning_facts(world, trainer=trainer)
    assert facts["version"] == version
    assert (facts["per_step_sigterm_sync"], facts["autocast_cache_enabled"]) == (sync, cache)
