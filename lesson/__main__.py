"""python -m lesson [--output PATH [--overwrite-output]]: write the lesson page.

Without --output it rewrites the repository's own docs/lesson.html (the page this command owns);
an --output PATH that exists is refused unless --overwrite-output, as every output here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.errors import OneLineParser, UsageError, exit_on_usage_error
from common.output import OutputError, mode_for, write_text
from lesson.costs import CostsError, read_costs
from lesson.page import render
from lesson.source import LessonError, read_runners

PROG = "lesson"
ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "lesson.html"


def write_page(path: Path, text: str, replace: bool) -> None:
    """The one call to the suite's writer: the page this command owns is replaced, any other
    --output PATH follows --overwrite-output."""
    write_text(path, text, mode="replace" if path == PAGE else mode_for(replace))


def main(argv: list[str] | None = None) -> int:
    """Parse, read the runner files, render, write; one line and exit 2 for a user's mistake."""
    parser = OneLineParser(
        prog=PROG,
        description="Write the lesson page: native, Fabric and"
        " the Trainer side by side, one row per # DDP: mark, and what each responsibility costs"
        " (lesson/costs.py names the committed folders).",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="PATH",
        help="where to write the page (default: rewrite docs/lesson.html of this checkout)",
    )
    parser.add_argument(
        "--overwrite-output", action="store_true", help="replace an existing --output PATH"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with exit_on_usage_error(PROG):
        try:
            text = render(read_runners(ROOT), read_costs(ROOT))
        except (LessonError, CostsError) as error:
            raise UsageError(str(error)) from None
        path, replace = (
            (PAGE, True) if args.output is None else (args.output, args.overwrite_output)
        )
        try:
            write_page(path, text, replace)
        except OutputError as error:
            raise UsageError(str(error)) from None
    print(f"{PROG}: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
