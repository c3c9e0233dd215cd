"""User-facing errors: one line, exit status 2, no traceback unless --verbose.

    from common.errors import UsageError, exit_on_usage_error
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator

USAGE_EXIT_CODE = 2


class UsageError(Exception):
    """A mistake the user can fix: the message names the flag or variable and the fix."""


@contextlib.contextmanager
def exit_on_usage_error(prog: str, verbose: bool = False) -> Iterator[None]:
    """Turn a UsageError into one line on stderr and exit status 2 (a traceback too if verbose)."""
    try:
        yield
    except UsageError as error:
        if verbose:
            traceback.print_exc()
        print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(USAGE_EXIT_CODE) from None
