"""The one clock format for records: ISO 8601 UTC to the second, with a "Z" suffix.

    from common.clock import utc_now      # "2026-12-03T06:34:58Z"

Imports neither torch nor lightning: results, manifests and compare share it.
"""

from __future__ import annotations

from datetime import datetime, timezone

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    """The time now, ISO 8601 UTC to the second ("2026-12-03T06:34:58Z")."""
    return datetime.now(timezone.utc).strftime(FORMAT)
