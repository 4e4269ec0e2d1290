"""Server logs in the report of a failed test: each conftest says which logs concern a test, one hook attaches them.

``pytest_runtest_makereport = attach_on_failure(sections)`` in a conftest.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable

import pytest

Sections = Callable[[pytest.Item], Iterable[tuple[str, str]]]
"""(title, text) of each log section for a test item."""
Hook = Callable[[pytest.Item, pytest.CallInfo[None]], Generator[None, pytest.TestReport, pytest.TestReport]]


def attach_on_failure(sections: Sections) -> Hook:
    """A ``pytest_runtest_makereport`` wrapper adding ``sections(item)`` to the report of a failed phase."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.failed:
            report.sections.extend(sections(item))
        return report

    return pytest_runtest_makereport


def tail(title: str, text: str, lines: int) -> tuple[str, str]:
    """A section of the last ``lines`` lines of ``text``."""
    return title, "\n".join(text.splitlines()[-lines:])
