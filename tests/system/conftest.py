"""The system tests' fixtures shared across folders: the one real control plane of the session (and each test's
slice of it), for ``tests/system/controlplane`` and the cross-stage tests that use it (see
``tests/system/controlplane/fixtures.py``)."""

from tests.system.controlplane.fixtures import (  # noqa: F401  (fixtures and the failure report's hook)
    cluster,
    control_plane,
    prod_plan,
    pytest_runtest_makereport,
)
