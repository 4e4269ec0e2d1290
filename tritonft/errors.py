"""Errors a user can fix. The CLI prints them without a traceback and exits 1."""

from __future__ import annotations


class UserError(Exception):
    """Bad input. The message names the input and the fix; ``problems`` lists every one when several were found."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        lines = [message, *(f"  - {p}" for p in self.problems)]
        super().__init__("\n".join(lines))
