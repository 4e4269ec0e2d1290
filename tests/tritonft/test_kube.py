"""Status conditions as the API reports them, including before any controller wrote one."""

from __future__ import annotations

from tritonft.kube import condition_true


def test_a_freshly_created_object_with_null_conditions_has_no_condition_true() -> None:
    assert condition_true({"metadata": {"name": "crd"}, "status": {"conditions": None}}, "Established") is False
    assert condition_true({"metadata": {"name": "crd"}, "status": None}, "Established") is False


def test_a_condition_counts_only_when_its_status_is_true() -> None:
    status = {"conditions": [{"type": "Established", "status": "False"}, {"type": "NamesAccepted", "status": "True"}]}
    assert condition_true({"status": status}, "NamesAccepted") is True
    assert condition_true({"status": status}, "Established") is False
