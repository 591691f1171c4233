"""How the ``offsetlog`` command prints: tables, JSON, errors and progress.

* Results go to stdout; errors, warnings and progress to stderr.
* On a terminal, tables are rich tables (box drawing, colour). Piped or redirected, they are
  plain text in aligned columns, as ``kafka-consumer-groups`` prints them: no box drawing, no
  colour, never cut to the width of a terminal, so ``grep``, ``awk`` and ``sort`` work on them.
* ``--json``: one JSON document (JSON lines for ``dump``) with the same fields as the text,
  snake_case, ``null`` where the text says ``-``.
* Progress bars are drawn on stderr, only when stderr is a terminal, and vanish when done.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress,
                           SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table
from rich.text import Text


class Styled(str):
    """A table cell or line with a rich style for the terminal (``"red"``, ``"yellow"``);
    plain output prints the text only."""

    style: str

    def __new__(cls, text: str, style: str) -> "Styled":
        obj = super().__new__(cls, text)
        obj.style = style
        return obj


def ts(ms: int | None) -> str:
    """Epoch ms as ISO 8601 UTC with milliseconds, ``-`` for None."""
    if ms is None:
        return "-"
    t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]],
                right: frozenset[str] | set[str] = frozenset()) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [len(c) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [list(columns), *rows]:
        cells = [cell.rjust(w) if col in right else cell.ljust(w)
                 for col, cell, w in zip(columns, row, widths)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


class Output:
    """Where and how one command prints.

    :param json_mode: the command was given ``--json``
    :param terminal: whether stdout is a terminal (default: ask it)
    """

    def __init__(self, *, json_mode: bool = False, stdout: IO[str] | None = None,
                 stderr: IO[str] | None = None, terminal: bool | None = None,
                 err_terminal: bool | None = None) -> None:
        self.json = json_mode
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.terminal = _isatty(self.stdout) if terminal is None else terminal
        self.err_terminal = _isatty(self.stderr) if err_terminal is None else err_terminal
        self._console: Console | None = None
        self._err_console: Console | None = None

    # -- consoles ------------------------------------------------------------------------

    @property
    def console(self) -> Console:
        """rich on stdout (only used when stdout is a terminal)."""
        if self._console is None:
            self._console = Console(file=self.stdout, force_terminal=self.terminal,
                                    highlight=False)
        return self._console

    @property
    def err_console(self) -> Console:
        if self._err_console is None:
            self._err_console = Console(file=self.stderr, force_terminal=self.err_terminal,
                                        highlight=False)
        return self._err_console

    # -- results -------------------------------------------------------------------------

    def line(self, text: str = "") -> None:
        """One line of result text (a ``Styled`` line is coloured on a terminal)."""
        if self.terminal:
            style = getattr(text, "style", None)
            self.console.print(Text(str(text), style=style) if style else Text(str(text)),
                               soft_wrap=True)
        else:
            self.stdout.write(f"{text}\n")

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[str]], *,
              title: str | None = None, right: Sequence[str] = ()) -> None:
        """A table of text cells (``Styled`` cells are coloured on a terminal).

        :param title: shown above a terminal table; plain output leaves it out, so the first
            line is the header (as ``kafka-consumer-groups`` prints)
        :param right: columns aligned right (numbers)
        """
        rows = [[str(c) if not isinstance(c, str) else c for c in row] for row in rows]
        if not self.terminal:
            self.stdout.write(plain_table(columns, rows, set(right)) + "\n")
            return
        t = Table(title=escape(title) if title else None)
        for col in columns:
            t.add_column(col, justify="right" if col in right else "left", overflow="fold")
        for row in rows:
            t.add_row(*(Text(c, style=getattr(c, "style", "")) for c in row))
        self.console.print(t)

    def emit_json(self, doc: Any) -> None:
        """One JSON document."""
        self.stdout.write(json.dumps(doc, indent=2, default=_jsonable) + "\n")

    def json_line(self, doc: Any) -> None:
        """One line of a JSON-lines stream."""
        self.stdout.write(json.dumps(doc, separators=(",", ":"), default=_jsonable) + "\n")

    # -- diagnostics ---------------------------------------------------------------------

    def error(self, message: str) -> None:
        """``offsetlog: message`` on stderr."""
        self.stderr.write(f"offsetlog: {message}\n")
        self.stderr.flush()

    def warn(self, message: str) -> None:
        self.error(message)

    # -- progress ------------------------------------------------------------------------

    @contextlib.contextmanager
    def progress(self, total: int | None, label: str, *, unit: str = "bytes"
                 ) -> Iterator[Callable[[int], None]]:
        """A transient progress bar on stderr when it is a terminal; yields ``advance(n)``.

        :param total: None for a spinner (no known end)
        :param unit: ``"bytes"`` or ``"items"`` (shown as done/total)
        """
        if not self.err_terminal:
            yield lambda n: None
            return
        if total is None:
            columns: list = [SpinnerColumn(), TextColumn("{task.description}"),
                             TimeElapsedColumn()]
        else:
            columns = [TextColumn("{task.description}"), BarColumn(),
                       DownloadColumn() if unit == "bytes" else MofNCompleteColumn(),
                       TimeRemainingColumn()]
        bar = Progress(*columns, console=self.err_console, transient=True)
        task = bar.add_task(label, total=total)
        with bar:
            yield lambda n: bar.advance(task, n)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)
