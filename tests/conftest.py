"""Shared fixtures: the deterministic mock engine (see ``tritonft.synth.engine``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tritonft.synth.engine import RecordingMocks, mock_engine


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    """A fresh mock engine (project ``triton-ft``, stack ``test``) recording every registered resource."""
    recorder = RecordingMocks()
    with mock_engine(recorder, project="triton-ft", stack="test"):
        yield recorder
