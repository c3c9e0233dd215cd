"""Lay out rows of strings as an aligned terminal table or a GitHub markdown table.

    print(text_table(["field", "native"], [["arch", "resnet50"]]))
    print(markdown_table(["field", "native"], [["arch", "resnet50"]]))

Written here because pandas' to_markdown needs `tabulate`, which compare does not require.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NUMBER = re.compile(r"^[+-]?\d[\d.,]*(e[+-]?\d+)?%?$")


def _is_number(cell: str) -> bool:
    """Numbers are right-aligned so that their digits line up."""
    return bool(_NUMBER.match(cell))


def _numeric_columns(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[bool]:
    """A column is numeric when every cell is a number or '-' (and one at least is a number)."""
    columns = list(zip(*rows)) if rows else [() for _ in headers]
    return [
        any(_is_number(c) for c in col) and all(_is_number(c) or c == "-" for c in col)
        for col in columns
    ]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: int = 2) -> str:
    """Columns padded to their widest cell, numeric columns right-aligned, a rule under the
    header."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    numeric = _numeric_columns(headers, rows)

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if right else c.ljust(w) for c, w, right in zip(cells, widths, numeric)
        ]
        return (" " * indent + "  ".join(padded)).rstrip()

    rule = " " * indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def _escape(cell: str) -> str:
    """A pipe would end the markdown cell early."""
    return cell.replace("|", "\\|")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub table: header row, separator row (numbers right-aligned), body rows."""
    separator = ["---:" if right else "---" for right in _numeric_columns(headers, rows)]
    lines = [headers, separator, *rows]
    return "\n".join("| " + " | ".join(_escape(str(c)) for c in cells) + " |" for cells in lines)
