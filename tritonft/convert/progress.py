"""Progress for long work: a redrawn bar on a terminal, periodic plain lines otherwise (Kubernetes Job logs)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


class Progress:
    """Counts bytes and items towards known totals.

    On a TTY the bar is redrawn at most 10 times a second; elsewhere one line is printed every ``interval``
    seconds (and at the end), so a log collector sees steady, parseable output without carriage returns.
    """

    def __init__(
        self, label: str, total_bytes: int, total_items: int, stream: TextIO | None = None, interval: float = 5.0
    ) -> None:
        self.label = label
        self.total_bytes = max(1, total_bytes)
        self.total_items = total_items
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = 0.1 if self.tty else interval
        self.done_bytes = 0
        self.done_items = 0
        self.start = time.monotonic()
        self._last = self.start

    def advance(self, nbytes: int, items: int = 1) -> None:
        self.done_bytes += nbytes
        self.done_items += items
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._emit(final=False)

    def close(self) -> None:
        self._emit(final=True)

    def _emit(self, final: bool) -> None:
        fraction = min(1.0, self.done_bytes / self.total_bytes)
        elapsed = time.monotonic() - self.start
        size = f"{human_bytes(self.done_bytes)}/{human_bytes(self.total_bytes)}"
        counts = f"{self.done_items}/{self.total_items} files, {size}"
        if self.tty:
            width = 30
            filled = int(width * fraction)
            bar = "#" * filled + "-" * (width - filled)
            end = "\n" if final else ""
            self.stream.write(f"\r{self.label} [{bar}] {fraction:6.1%} {counts} {elapsed:5.1f}s{end}")
        else:
            self.stream.write(f"{self.label}: {fraction:.0%} ({counts}, {elapsed:.1f}s)\n")
        self.stream.flush()
