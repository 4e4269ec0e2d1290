"""ModelStore: an RWX claim whose size the models never change (checked against them), protected when asked."""

from __future__ import annotations

import math
from typing import Any

import pytest

from components.common import sizing
from components.models.store import (
    DEFAULT_CAPACITY_GI,
    ELASTIC_NOMINAL_GI,
    ModelStore,
    ModelStoreArgs,
    claim_size_gi,
)
from tests.components.fixtures import GPTJ_6B, NAMESPACE, T5_SMALL, make_target
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks, Registered, run_program

PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def _store(mocks: RecordingMocks, **kwargs: Any) -> Registered:
    run_program(lambda: ModelStore("store", ModelStoreArgs(target=make_target(), **kwargs)))
    (claim,) = mocks.of_type(PVC)
    return claim


def test_the_claim_is_read_write_many_on_the_target_storage_class(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim.inputs["spec"]["storageClassName"] == "efs-sc"


def test_the_claim_has_an_explicit_name_and_namespace(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    assert claim.inputs["metadata"]["name"] == "store-models"
    assert claim.inputs["metadata"]["namespace"] == NAMESPACE


def test_the_claim_size_is_the_same_whatever_the_models(mocks):
    one = _store(mocks, models=(T5_SMALL,))
    mocks.resources.clear()
    two = _store(mocks, models=(T5_SMALL, GPTJ_6B))
    size = one.inputs["spec"]["resources"]["requests"]["storage"]
    assert size == two.inputs["spec"]["resources"]["requests"]["storage"] == f"{DEFAULT_CAPACITY_GI}Gi"


def test_an_explicit_size_wins(mocks):
    claim = _store(mocks, models=(GPTJ_6B,), size_gi=500)
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "500Gi"


def test_models_that_do_not_fit_a_capacity_bound_claim_are_refused_naming_the_setting(mocks):
    need = math.ceil((sizing.converted_bytes(T5_SMALL) + sizing.converted_bytes(GPTJ_6B)) * 2.0 / sizing.GIB)
    with pytest.raises(UserError, match=rf"storageSizeGiB: the models need {need} GiB .* holds 5 GiB; set .* {need}"):
        run_program(
            lambda: ModelStore(
                "store", ModelStoreArgs(target=make_target(), models=(T5_SMALL, GPTJ_6B), headroom=2.0, size_gi=5)
            )
        )


def test_an_elastic_store_is_never_checked_against_the_models_nor_patched(mocks):
    claim = _store(mocks, models=(GPTJ_6B,), size_gi=1, elastic=True)
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claim.ignore_changes == ("spec.resources.requests.storage",)


def test_an_elastic_store_without_a_size_requests_the_nominal_size(mocks):
    claim = _store(mocks, models=(T5_SMALL,), elastic=True)
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == f"{ELASTIC_NOMINAL_GI}Gi"


def test_a_capacity_bound_store_follows_a_deliberate_resize(mocks):
    claim = _store(mocks, models=(T5_SMALL,), size_gi=300)
    assert claim.ignore_changes == ()


def test_a_protected_store_is_protected_and_retained_on_delete(mocks):
    claim = _store(mocks, models=(T5_SMALL,), protect=True)
    assert claim.protect and claim.retain_on_delete


def test_an_unprotected_store_can_be_destroyed(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    assert not claim.protect and not claim.retain_on_delete


def test_the_claim_uses_the_targets_provider_and_is_parented(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    (component,) = mocks.of_type("triton-ft:storage:ModelStore")
    assert "::test-k8s::" in claim.provider
    assert claim.parent == component.urn


def test_claim_size_never_reads_the_models() -> None:
    assert claim_size_gi(None, elastic=False) == DEFAULT_CAPACITY_GI
    assert claim_size_gi(None, elastic=True) == ELASTIC_NOMINAL_GI
    assert claim_size_gi(42, elastic=True) == 42
