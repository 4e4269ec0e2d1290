"""The bench is measured against the probe's MLServer stand-in (its fixtures live with the probe's tests)."""

from tests.tritonft.probe.conftest import mlserver  # noqa: F401
