"""Which code ran: a digest of the suite's runner sources, independent of git.

    python -m common source-digest      # this checkout's digest, to match against results

A result records `environment.source_digest` beside the git commit. The digest covers every
`.py` file of common/, native/ and lightning_impl/ (path and content), so it identifies the
code a run executed also where the tree was copied without its git history (an rsync to a
cluster) or with stale git metadata, and `compare` shows when two runs' code differs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

SUITE_ROOT = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = ("common", "native", "lightning_impl")


def source_digest(root: Path = SUITE_ROOT) -> str:
    """sha256 over the runner packages' .py files, in path order (path, then content)."""
    h = hashlib.sha256()
    for package in SOURCE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()
