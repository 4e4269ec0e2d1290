"""Shared fixtures: the deterministic mock engine (see ``tritonft.synth.engine``); a failed test's report carries
the logs of the gateways it started."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.gateway.server import log_sections
from tritonft.synth.engine import RecordingMocks, mock_engine


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        report.sections.extend(log_sections(item))
    return report


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    """A fresh mock engine (project ``triton-ft``, stack ``test``) recording every registered resource."""
    recorder = RecordingMocks()
    with mock_engine(recorder, project="triton-ft", stack="test"):
        yield recorder
